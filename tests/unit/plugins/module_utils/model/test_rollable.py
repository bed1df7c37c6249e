import json

import pytest

from ansible_collections.vllm_pd.ascend.plugins.filter import pd_instances
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_launch
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import rollable


def running(kind, host, *extra, tp=8):
    argv = ["/opt/vllm-lab/bin/vllm", "serve", "/models/lab-model", "--tensor-parallel-size", str(tp), *extra]
    return dict(doctor_launch.parse_launch(argv, {}), host=host, kind=kind, unit="vllm-pd-%s.service" % kind)


def planned(kind, host, tp=8, **settings):
    base = dict((n, None) for n in rollable.SHARED)
    base.update(settings)
    return {"host": host, "kind": kind, "model_path": "/models/lab-model", "tp": tp, "settings": base}


def sized(kind, host, tp=8, dp=1, pp=1, pcp=1, extra=None, **settings):
    """A planned engine as the preflight lists it: the sizes of the host's first instance, its own kv extra keys."""
    return dict(planned(kind, host, tp, **settings), dp=dp, pp=pp, pcp=pcp, kv_connector_extra=extra or {})


RUN = [running("prefill", "p1"), running("decode", "d1")]


def test_the_same_plan_rolls():
    assert rollable.findings(RUN, [planned("prefill", "p1"), planned("decode", "d1")]) == []


def test_block_size_on_decode_only_is_refused_naming_it():
    [f] = rollable.findings(RUN, [planned("prefill", "p1"), planned("decode", "d1", block_size=64)])
    assert f["name"] == "ChangeNotRollable" and f["attributes"] == ["block size"]
    assert "block size on decode: null -> 64" in f["message"]
    assert "vllm_pd_allow_downtime: true" in f["message"]


def test_a_change_on_both_sides_still_mixes_old_and_new_while_it_rolls():
    [f] = rollable.findings([running("prefill", "p1", "--kv-cache-dtype", "fp8"), running("decode", "d1", "--kv-cache-dtype", "fp8")],
                            [planned("prefill", "p1", kv_cache_dtype="auto"), planned("decode", "d1", kv_cache_dtype="auto")])
    assert f["attributes"] == ["kv_cache_dtype"]


def test_model_spec_config_and_tp_are_shared_too():
    [f] = rollable.findings(RUN, [dict(planned("prefill", "p1", tp=4), model_path="/models/other"),
                                  planned("decode", "d1", speculative_config={"method": "mtp"})])
    assert f["attributes"] == ["model files", "tp size", "speculative config"]


def test_flags_and_env_that_p_and_d_do_not_share_roll():
    assert rollable.findings([running("decode", "d1", "--max-model-len", "4096")],
                             [planned("decode", "d1", max_model_len=8192)]) == []


def test_downtime_allowed_and_new_hosts_are_no_finding():
    plan = [planned("prefill", "p1"), planned("decode", "d1", block_size=64), planned("decode", "d2", block_size=64)]
    assert rollable.findings(RUN, plan, allow_downtime=True) == []
    assert rollable.findings([], plan) == []


def kv(prefill_dp, decode_dp, prefill_pp=None, **user):
    extra = {"prefill": {"tp_size": 8, "dp_size": prefill_dp}, "decode": {"tp_size": 8, "dp_size": decode_dp}}
    if prefill_pp is not None:
        extra["prefill"]["pp_size"] = prefill_pp
    for key, value in user.items():
        extra["prefill"][key] = value
    return json.dumps({"kv_connector": "MooncakeConnectorV1", "kv_connector_extra_config": extra})


def test_a_new_dp_rank_of_an_moe_group_changes_every_engine_and_cannot_roll():
    run = [running("prefill", "p1", "--kv-transfer-config", kv(1, 2)), running("decode", "d1", "--kv-transfer-config", kv(1, 2))]
    plan = [dict(planned("prefill", "p1"), dp=1), dict(planned("decode", "d1"), dp=3)]
    [f] = rollable.findings(run, plan)
    assert f["attributes"] == ["dp size"]
    assert "dp size on decode: 2 -> 3" in f["message"] and "prefill: 1 ->" not in f["message"]
    # a dense model's ranks run with DP size 1 each: another rank changes no running engine
    assert rollable.findings([running("decode", "d1", "--kv-transfer-config", kv(1, 1))],
                             [dict(planned("decode", "d1"), dp=1), dict(planned("decode", "d2"), dp=1)]) == []


def running_1p1d(*p_args, prefill_pp=None, **user):
    """A 1P1D running as the engine role starts it: P's own argv, both carrying the kv extra config."""
    extra = kv(1, 1, prefill_pp, **user)
    return [running("prefill", "p1", *p_args, "--kv-transfer-config", extra),
            running("decode", "d1", "--kv-transfer-config", extra)]


def test_pp_on_prefill_is_refused_naming_it_from_p_and_from_what_d_carries():
    [f] = rollable.findings(running_1p1d(), [sized("prefill", "p1", pp=2), sized("decode", "d1")])
    assert f["attributes"] == ["pp size"]
    # P launches with it and D reads it (kv_connector_extra_config.prefill.pp_size): one change, named once
    assert "pp size on prefill: 1 -> 2" in f["message"] and f["message"].count("pp size on") == 1
    assert "vllm_pd_allow_downtime: true" in f["message"]
    # back from 2 to 1: P's argv and D's prefill.pp_size (written only above 1, read as 1 when missing)
    [f] = rollable.findings(running_1p1d("--pipeline-parallel-size", "2", prefill_pp=2),
                            [sized("prefill", "p1"), sized("decode", "d1")])
    assert "pp size on prefill: 2 -> 1" in f["message"]


def test_pp_on_prefill_is_seen_on_d_alone_too():
    # only D runs (or only D's host is read): its kv extra config still names P's old pipeline size
    [f] = rollable.findings(running_1p1d()[1:], [sized("prefill", "p1", pp=2), sized("decode", "d1")])
    assert f["attributes"] == ["pp size"] and "pp size on prefill: 1 -> 2" in f["message"]


def test_pcp_on_prefill_is_refused_naming_it():
    [f] = rollable.findings(running_1p1d(), [sized("prefill", "p1", pcp=2), sized("decode", "d1")])
    assert f["attributes"] == ["pcp size"] and "pcp size on prefill: 1 -> 2" in f["message"]
    [f] = rollable.findings(running_1p1d("-pcp=2"), [sized("prefill", "p1"), sized("decode", "d1")])
    assert "pcp size on prefill: 2 -> 1" in f["message"]


@pytest.mark.parametrize("spelling", [["--pipeline-parallel-size", "2"], ["--pipeline-parallel-size=2"], ["-pp", "2"], ["-pp=2"]])
def test_unchanged_pp_is_no_finding_in_any_spelling(spelling):
    assert rollable.findings(running_1p1d(*spelling, prefill_pp=2), [sized("prefill", "p1", pp=2), sized("decode", "d1")]) == []


def test_pp_from_the_extra_args_or_from_the_variable_is_one_plan():
    # pp given in prefill_extra_args before and as vllm_pd_prefill_pp_size now (or the reverse) is no change:
    # both plan the same instances, and the engine runs with the same --pipeline-parallel-size
    by_args = pd_instances.pd_instances("prefill", 8, extra_args=["--pipeline-parallel-size", "2"], devices=list(range(16)))
    by_var = pd_instances.pd_instances("prefill", 8, pp_size=2, devices=list(range(16)))
    assert by_args[0]["pp"] == by_var[0]["pp"] == 2
    assert by_var[0]["parallel_args"] == ["--pipeline-parallel-size", "2"] and by_args[0]["parallel_args"] == []
    plan = [sized("prefill", "p1", pp=by_var[0]["pp"]), sized("decode", "d1")]
    assert rollable.findings(running_1p1d("--pipeline-parallel-size", "2", prefill_pp=2), plan) == []
    assert rollable.findings(running_1p1d(*by_var[0]["parallel_args"], prefill_pp=2),
                             [sized("prefill", "p1", pp=by_args[0]["pp"]), sized("decode", "d1")]) == []


def test_allow_downtime_applies_a_pp_change():
    plan = [sized("prefill", "p1", pp=2), sized("decode", "d1")]
    assert rollable.findings(running_1p1d(), plan, allow_downtime=True) == []
    assert rollable.changed_attributes(running_1p1d(), plan) == [("pp", "prefill", 1, 2)]


def test_what_p_and_d_do_not_share_still_rolls_with_the_sizes_planned():
    run = running_1p1d("--max-model-len", "4096", "-pp", "2", prefill_pp=2)
    assert rollable.findings(run, [sized("prefill", "p1", pp=2, max_model_len=8192), sized("decode", "d1")]) == []


def test_the_users_own_kv_extra_keys_are_shared_too():
    run = running_1p1d("-pp", "2", prefill_pp=2, pp_layer_partition="30,31")
    same = {"prefill": {"pp_layer_partition": "30,31"}}
    assert rollable.findings(run, [sized("prefill", "p1", pp=2, extra=same), sized("decode", "d1", extra=same)]) == []
    other = {"prefill": {"pp_layer_partition": "31,30"}}
    [f] = rollable.findings(run, [sized("prefill", "p1", pp=2, extra=other), sized("decode", "d1", extra=other)])
    assert f["attributes"] == ["kv_connector_extra_config.prefill.pp_layer_partition"]
    assert 'kv_connector_extra_config.prefill.pp_layer_partition on prefill: "30,31" -> "31,30"' in f["message"]
    # a plan that does not say what the user's keys are compares the sizes only
    unsaid = [dict(sized("prefill", "p1", pp=2), kv_connector_extra=None), dict(sized("decode", "d1"), kv_connector_extra=None)]
    assert rollable.findings(run, unsaid) == []


def test_the_compared_set_comes_from_the_fit_rules_and_the_release_table():
    assert rollable.SHARED == ("dtype", "kv_cache_dtype", "block_size", "quantization", "speculative_config")
    # and the sizes kv_connector_extra_config carries for each side, as the release table says the connector reads
    assert rollable.KV_SIZES == ("tp", "dp", "pp")


def test_the_running_engines_sizes_are_read_from_its_argv():
    got = doctor_launch.parse_launch(["vllm", "serve", "/m", "-tp", "4", "--pipeline-parallel-size=2", "-pcp", "2"], {})
    assert (got["tp"], got["pp"], got["pcp"], got["error"]) == (4, 2, 2, "")
    got = doctor_launch.parse_launch(["vllm", "serve", "/m"], {})
    assert (got["tp"], got["pp"], got["pcp"]) == (1, 1, 1)
    assert "not a whole number" in doctor_launch.parse_launch(["vllm", "serve", "/m", "-pp", "x"], {})["error"]
