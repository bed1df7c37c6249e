from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.orphans import orphan_units

LINES = ["vllm-pd-prefill.service loaded active running vLLM prefill",
         "vllm-pd-decode-dp1.service loaded inactive dead vLLM decode",
         "vllm-pd-proxy.service loaded active running proxy",
         "vllm-pd-lab-helper.service loaded active running not ours"]


def test_units_no_plan_explains_are_orphans():
    assert orphan_units(LINES, ["vllm-pd-prefill.service"], True) == ["vllm-pd-decode-dp1.service"]


def test_a_proxy_unit_on_a_host_that_is_no_proxy_host_any_more():
    assert orphan_units(LINES, ["vllm-pd-prefill.service", "vllm-pd-decode-dp1.service"], False) == [
        "vllm-pd-proxy.service"]


def test_nothing_planned_everything_of_ours_is_orphan():
    assert orphan_units(LINES, [], False) == ["vllm-pd-prefill.service", "vllm-pd-decode-dp1.service",
                                              "vllm-pd-proxy.service"]
