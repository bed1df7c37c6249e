import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_port_windows import pd_port_windows


def test_defaults_and_moved_windows_as_kv_port_group_options():
    assert pd_port_windows({}) == {"ascend_base_port": 20000, "te_rpc_range": [15000, 17000], "hccl_range": [60000, 60031]}
    assert pd_port_windows(None)["te_rpc_range"] == [15000, 17000]
    assert pd_port_windows({"ASCEND_BASE_PORT": 40000, "MC_MIN_RPC_PORT": "50000", "MC_MAX_RPC_PORT": "51000",
                            "HCCL_IF_BASE_PORT": "61000", "HF_TOKEN": "x"}) == {
        "ascend_base_port": 40000, "te_rpc_range": [50000, 51000], "hccl_range": [61000, 61031]}


def test_a_bad_value_names_the_variable_and_the_host_but_not_other_values():
    with pytest.raises(AnsibleFilterError) as e:
        pd_port_windows({"MC_MAX_RPC_PORT": "abc", "VLLM_API_KEY": "secret"}, hostname="npu-p01")
    assert "host npu-p01: MC_MAX_RPC_PORT=abc" in str(e.value) and "secret" not in str(e.value)
    with pytest.raises(AnsibleFilterError, match="must be a mapping"):
        pd_port_windows(["ASCEND_BASE_PORT=1"])
