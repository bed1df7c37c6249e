import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_instances import engine_instances, group_ports, pd_instances
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases as R


def test_internal_dp_is_one_instance_with_the_legacy_unit():
    [one] = engine_instances("prefill", 8, 1, [], 8100)
    assert one["unit"] == "vllm-pd-prefill.service"
    assert one["env_file"] == "/etc/vllm-pd/prefill.env"
    assert (one["api_port"], one["dp_rank_start"], one["dp_size_local"]) == (8100, 0, 1)
    assert one["devices"] == [str(i) for i in range(8)]
    assert one["dp_args"] == [] and one["external"] is False


def test_internal_dp_serves_every_rank_in_one_instance():
    [one] = engine_instances("decode", 2, 4, None, 8200)
    assert (one["dp_rank_start"], one["dp_size_local"]) == (0, 4)
    assert one["devices"] == [str(i) for i in range(8)]


def test_external_dp_one_instance_per_rank_in_rank_order():
    two = engine_instances("prefill", 4, 4, [3, 2], 8100)
    assert [i["name"] for i in two] == ["prefill-dp2", "prefill-dp3"]
    assert [i["unit"] for i in two] == ["vllm-pd-prefill-dp2.service", "vllm-pd-prefill-dp3.service"]
    assert [i["env_file"] for i in two] == ["/etc/vllm-pd/prefill-dp2.env", "/etc/vllm-pd/prefill-dp3.env"]
    assert [i["api_port"] for i in two] == [8100, 8101]
    assert [(i["dp_rank_start"], i["dp_size_local"]) for i in two] == [(2, 1), (3, 1)]
    assert two[0]["devices"] == ["0", "1", "2", "3"] and two[1]["devices"] == ["4", "5", "6", "7"]
    assert two[1]["dp_args"] == ["--data-parallel-rank", "3", "--data-parallel-size-local", "1"]
    assert all(i["external"] for i in two)


def test_devices_are_handed_out_tp_per_rank():
    two = engine_instances("decode", 2, 2, [0, 1], 8200, devices=[9, 8, 7, 6])
    assert [i["devices"] for i in two] == [["9", "8"], ["7", "6"]]


@pytest.mark.parametrize("ranks, words", [
    ([0, 0], "vllm_pd_prefill_dp_ranks=[0, 0] lists a rank twice"),
    ([1, 4], "rank(s) [4] outside 0-3 (vllm_pd_prefill_dp_size=4)"),
    (["x"], "vllm_pd_prefill_dp_ranks='x' is not a whole number"),
])
def test_bad_ranks_name_the_variable_and_host(ranks, words):
    with pytest.raises(ValueError) as err:
        engine_instances("prefill", 4, 4, ranks, 8100, hostname="npu-p01")
    assert words in str(err.value)
    assert "x" in ranks or "host npu-p01" in str(err.value)


def test_wrong_device_count_names_the_need():
    with pytest.raises(ValueError) as err:
        engine_instances("prefill", 4, 2, [0, 1], 8100, devices=[0, 1, 2, 3], hostname="npu-p01")
    assert "host npu-p01: prefill_devices has 4 NPU ids but this host's prefill instances need tp*pp*pcp 4 x 2 rank(s) = 8" \
        in str(err.value)


def test_the_filter_raises_an_ansible_error():
    with pytest.raises(AnsibleFilterError, match="lists a rank twice"):
        pd_instances("decode", 1, 2, [1, 1], 8200)
    with pytest.raises(AnsibleFilterError, match="not one of prefill, decode"):
        pd_instances("proxy", 1, 1, [], 8000)


def test_the_plan_says_how_each_instance_runs():
    [one] = engine_instances("prefill", 8, 1, [], 8100)
    assert (one["kind"], one["runtime"], one["container"]) == ("prefill", "systemd", None)
    two = engine_instances("decode", 2, 2, [0, 1], 8200, runtime="container", container_engine="docker",
                           container_image="img:1")
    assert [i["container"] for i in two] == ["vllm-pd-decode-dp0", "vllm-pd-decode-dp1"]
    assert {(i["runtime"], i["container_engine"], i["container_image"]) for i in two} == {("container", "docker", "img:1")}
    with pytest.raises(ValueError, match="host h1: decode_runtime=docker is not one of systemd, container"):
        engine_instances("decode", 2, 1, [], 8200, hostname="h1", runtime="docker")


def test_moe_instances_share_the_kv_port_and_bind_by_dp_rank():
    two = engine_instances("prefill", 4, 2, [0, 1], 8100, kv_port=30000, model_kind="moe")
    assert [(i["kv_port"], i["port_rank_start"], i["tp"], i["dp_size"]) for i in two] == [(30000, 0, 4, 2), (30000, 1, 4, 2)]
    assert two[1]["dp_args"] == ["--data-parallel-rank", "1", "--data-parallel-size-local", "1"]


def test_dense_external_dp_ranks_become_independent_instances_with_own_kv_ports():
    two = engine_instances("prefill", 4, 2, [0, 1], 8100, kv_port=30000, model_kind="dense")
    # vLLM resets data_parallel_rank to 0 for dense models: each instance has its own kv_port instead.
    assert [(i["kv_port"], i["port_rank_start"], i["dp_size"], i["dp_args"]) for i in two] == [
        (30000, 0, 1, []), (30004, 0, 1, [])]
    groups = [set(range(i["kv_port"] + i["port_rank_start"] * 4, i["kv_port"] + i["port_rank_start"] * 4 + 4))
              for i in two]
    assert not groups[0] & groups[1]
    assert all(i["model_kind"] == "dense" for i in two)


def test_dense_internal_dp_on_prefill_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match="vllm_pd_prefill_dp_ranks"):
        engine_instances("prefill", 4, 2, [], 8100, kv_port=30000, model_kind="dense")
    # a consumer binds nothing, and dp 1 decides nothing
    assert engine_instances("decode", 4, 2, [], 8200, kv_port=30100, model_kind="dense")[0]["dp_size"] == 2
    assert engine_instances("prefill", 4, 1, [], 8100, kv_port=30000, model_kind="dense")[0]["kv_port"] == 30000


@pytest.mark.parametrize("version, env", [
    ("0.23.0.post1", {"VLLM_ASCEND_BALANCE_SCHEDULING": "1"}), ("0.13.0", {}), ("0.18.0", {"VLLM_ASCEND_BALANCE_SCHEDULING": "1"}),
])
def test_dense_internal_dp_on_prefill_gets_the_moe_plan_where_the_release_keeps_the_rank(version, env):
    keeps = R.dense_dp_keeps_rank(version, env)
    dense = engine_instances("prefill", 4, 2, [], 8100, kv_port=30000, model_kind="dense", dense_keeps_rank=keeps)
    moe = engine_instances("prefill", 4, 2, [], 8100, kv_port=30000, model_kind="moe")
    plan = ("kv_port", "port_rank_start", "dp_size", "dp_size_local", "tp", "devices")
    assert [{k: i[k] for k in plan} for i in dense] == [{k: i[k] for k in plan} for i in moe]
    assert group_ports(dense[0]) == list(range(30000, 30008))


def test_dense_internal_dp_on_prefill_is_refused_on_0_18_without_balance_scheduling():
    with pytest.raises(ValueError, match="VLLM_ASCEND_BALANCE_SCHEDULING"):
        engine_instances("prefill", 4, 2, [], 8100, kv_port=30000, model_kind="dense",
                         dense_keeps_rank=R.dense_dp_keeps_rank("0.18.0", {}))


def test_unknown_kind_matters_only_with_dp():
    with pytest.raises(ValueError, match="set vllm_pd_model_kind to moe or dense"):
        engine_instances("prefill", 4, 2, [0, 1], 8100, kv_port=30000, model_kind="unknown")
    [one] = engine_instances("prefill", 4, 1, [], 8100, kv_port=30000, model_kind="unknown")
    assert one["port_rank_start"] == 0 and one["model_kind"] == "moe"
    with pytest.raises(ValueError, match="vllm_pd_model_kind=big"):
        engine_instances("prefill", 4, 1, [], 8100, kv_port=30000, model_kind="big")


def test_group_text_names_the_plan():
    from ansible_collections.vllm_pd.ascend.plugins.filter.pd_instances import group_ports, pd_group_text
    moe, dense = (engine_instances("prefill", 4, 2, [1], 8100, kv_port=28002, model_kind=k)[0] for k in ("moe", "dense"))
    assert group_ports(moe) == group_ports(dense) == [28006, 28007, 28008, 28009]
    assert "prefill-dp1" in pd_group_text(dense) and "kv_port 28006" in pd_group_text(dense)
    assert "group 28006-28009" in pd_group_text(moe) and "DP rank in the port formula 1" in pd_group_text(moe)


def test_pipeline_and_context_parallel_widen_the_group_and_the_npus():
    # MoE, tp 2, pp 2, pcp 2, external DP ranks 1 and 2: each rank 8 ports and 8 NPUs
    out = engine_instances("prefill", 2, 4, [1, 2], 8100, kv_port=30000, pp_size=2, pcp_size=2)
    assert [(i["kv_port"], i["port_rank_start"], i["pp"], i["pcp"], len(i["devices"])) for i in out] == \
        [(30000, 1, 2, 2, 8), (30000, 2, 2, 2, 8)]
    assert group_ports(out[0]) == list(range(30008, 30016))
    # a dense model's independent instances get kv_port + R*tp*pp*pcp of their own
    dense = engine_instances("prefill", 2, 2, [0, 1], 8100, kv_port=30000, model_kind="dense", pp_size=2)
    assert [(i["kv_port"], group_ports(i)) for i in dense] == [
        (30000, [30000, 30001, 30002, 30003]), (30004, [30004, 30005, 30006, 30007])]


@pytest.mark.parametrize("tp, pp, pcp, rank", [(1, 2, 1, 0), (2, 2, 1, 1), (4, 1, 2, 3), (2, 2, 2, 2)])
def test_group_ports_is_the_connector_formula_in_worker_order(tp, pp, pcp, rank):
    inst = engine_instances("prefill", tp, 4, [rank], 8100, kv_port=40000, pp_size=pp, pcp_size=pcp)[0]
    assert group_ports(inst) == [40000 + rank * tp * pp * pcp + (p * pcp + c) * tp + t
                                 for p in range(pp) for c in range(pcp) for t in range(tp)]
    assert group_ports(dict(inst, pp=1, pcp=1)) == [40000 + rank * tp + t for t in range(tp)]


def test_the_filter_reads_the_sizes_from_variables_and_extra_args():
    [i] = pd_instances("prefill", 2, 1, [], 8100, kv_port=30000, extra_args=["--pipeline-parallel-size", "2"])
    assert (i["pp"], i["pcp"], i["parallel_args"]) == (2, 1, [])
    [i] = pd_instances("prefill", 2, 1, [], 8100, kv_port=30000, pp_size=2, pcp_size="1")
    assert (i["pp"], i["parallel_args"]) == (2, ["--pipeline-parallel-size", "2"])
    [i] = pd_instances("prefill", 2, 1, [], 8100, kv_port=30000, pp_size=2, extra_args=["-pp=2", "-pcp", "2"])
    assert (i["pp"], i["pcp"], i["parallel_args"]) == (2, 2, [])
    with pytest.raises(AnsibleFilterError, match="host p1: vllm_pd_prefill_pp_size=4 but prefill_extra_args pass "
                                                 "--pipeline-parallel-size 2"):
        pd_instances("prefill", 2, 1, [], 8100, hostname="p1", pp_size=4, extra_args=["-pp", "2"])
