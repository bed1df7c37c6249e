import json

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_launch
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import rollable


def running(kind, host, *extra, tp=8):
    argv = ["/opt/vllm-lab/bin/vllm", "serve", "/models/lab-model", "--tensor-parallel-size", str(tp), *extra]
    return dict(doctor_launch.parse_launch(argv, {}), host=host, kind=kind, unit="vllm-pd-%s.service" % kind)


def planned(kind, host, tp=8, **settings):
    base = dict((n, None) for n in rollable.SHARED)
    base.update(settings)
    return {"host": host, "kind": kind, "model_path": "/models/lab-model", "tp": tp, "settings": base}


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
    assert f["attributes"] == ["model files", "tp relation", "speculative config"]


def test_flags_and_env_that_p_and_d_do_not_share_roll():
    assert rollable.findings([running("decode", "d1", "--max-model-len", "4096")],
                             [planned("decode", "d1", max_model_len=8192)]) == []


def test_downtime_allowed_and_new_hosts_are_no_finding():
    plan = [planned("prefill", "p1"), planned("decode", "d1", block_size=64), planned("decode", "d2", block_size=64)]
    assert rollable.findings(RUN, plan, allow_downtime=True) == []
    assert rollable.findings([], plan) == []


def kv(prefill_dp, decode_dp):
    extra = {"prefill": {"tp_size": 8, "dp_size": prefill_dp}, "decode": {"tp_size": 8, "dp_size": decode_dp}}
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
