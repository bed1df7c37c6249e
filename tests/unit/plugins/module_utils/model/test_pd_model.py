import json

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import pd_model


@pytest.mark.parametrize("config, experts, kind", [
    ({"num_experts": 128}, 128, "moe"),
    ({"n_routed_experts": 256, "moe_intermediate_size": 2048}, 256, "moe"),
    ({"text_config": {"num_local_experts": 16}}, 16, "moe"),
    ({"num_local_experts": [8, 8]}, 8, "moe"),
    ({"num_experts": None}, 0, "dense"),
    ({"moe_intermediate_size": 1024}, 0, "dense"),  # alone it triggers nothing
    ({"hidden_size": 4096}, 0, "dense"),
    ({"num_experts": 0, "n_routed_experts": 64}, 0, "dense"),  # the first present key decides
])
def test_vllm_rule_for_moe(config, experts, kind):
    assert pd_model.expert_count(config) == experts
    assert pd_model.model_kind(config) == kind


def test_ascend_rule_is_any_key_with_expert():
    assert pd_model.ascend_moe({"num_experts_per_tok": 2})
    assert not pd_model.ascend_moe({"hidden_size": 1})


def test_resolve_kind():
    assert pd_model.resolve_kind("auto", "dense") == "dense"
    assert pd_model.resolve_kind("auto", None) == "unknown"
    assert pd_model.resolve_kind("moe", "dense") == "moe"
    with pytest.raises(ValueError, match="vllm_pd_model_kind=x"):
        pd_model.resolve_kind("x", None)


def _reader(files):
    return files.get


def test_read_model_dir_hashes_config_and_tokenizer_files():
    files = {"/m/config.json": json.dumps({"num_experts": 4}).encode(), "/m/tokenizer.json": b"{}",
             "/m/weights.safetensors": b"x"}
    facts = pd_model.read_model_dir("/m", _reader(files))
    assert facts["exists"] and facts["kind"] == "moe" and facts["experts"] == 4
    assert sorted(facts["files"]) == ["config.json", "tokenizer.json"]
    one_byte = dict(files, **{"/m/config.json": json.dumps({"num_experts": 5}).encode()})
    assert pd_model.read_model_dir("/m", _reader(one_byte))["fingerprint"] != facts["fingerprint"]
    tok = dict(files, **{"/m/tokenizer.json": b"{ }"})
    assert pd_model.read_model_dir("/m", _reader(tok))["fingerprint"] != facts["fingerprint"]


def test_missing_and_bad_model():
    assert not pd_model.read_model_dir("/none", _reader({}))["exists"]
    assert "not a directory" in pd_model.read_model_dir("Qwen/Qwen3-8B", _reader({}))["error"]
    bad = pd_model.read_model_dir("/m", _reader({"/m/config.json": b"{"}))
    assert bad["exists"] and bad["kind"] is None and "not JSON" in bad["error"]


@pytest.mark.parametrize("config, experts, kind", [
    # NemotronH-style heterogeneous blocks: the most routed experts of a MoE block (vLLM get_num_experts)
    ({"block_configs": [{"block_type": "attention"}, {"block_type": "moe", "n_routed_experts": 64},
                        {"block_type": "moe", "n_routed_experts": 128}]}, 128, "moe"),
    ({"block_configs": [{"block_type": "mamba", "n_routed_experts": 64}]}, 0, "dense"),
    ({"num_experts": 0, "block_configs": [{"block_type": "moe", "n_routed_experts": 8}]}, 8, "moe"),
    # the other names of transformers' get_text_config
    ({"decoder": {"num_local_experts": 8}}, 8, "moe"),
    ({"generator": {"n_routed_experts": 16}}, 16, "moe"),
    ({"text_encoder": {"hidden_size": 8}}, 0, "dense"),
    ({"text_config": {"block_configs": [{"block_type": "moe", "n_routed_experts": 4}]}}, 4, "moe"),
])
def test_vllm_rule_for_moe_with_blocks_and_sub_configs(config, experts, kind):
    assert pd_model.expert_count(config) == experts
    assert pd_model.model_kind(config) == kind
    assert pd_model.kind_problem(config) is None


@pytest.mark.parametrize("config, words", [
    ({"text_config": {"hidden_size": 8}, "decoder": {"num_experts": 8}}, "more than one text sub-config (decoder, text_config)"),
    ({"llm_config": {"num_local_experts": 8}, "vision_config": {}}, "expert keys under llm_config"),
    ({"text_config": {"hidden_size": 8}, "thinker_config": {"text_config": {"num_experts": 8}}},
     "expert keys under thinker_config.text_config"),
])
def test_a_config_vllm_reads_another_way_is_unknown_and_says_why(config, words):
    assert pd_model.model_kind(config) is None
    assert words in pd_model.kind_problem(config)
    assert pd_model.resolve_kind("auto", pd_model.model_kind(config)) == "unknown"
    assert pd_model.resolve_kind("moe", pd_model.model_kind(config)) == "moe"


def test_an_unknown_kind_is_in_the_facts_and_refused_where_it_decides_the_ports():
    from ansible_collections.vllm_pd.ascend.plugins.filter.pd_instances import engine_instances
    facts = pd_model.read_model_dir("/m", _reader({"/m/config.json": json.dumps({"llm_config": {"num_experts": 4}}).encode()}))
    assert facts["kind"] is None and "llm_config" in facts["error"]
    with pytest.raises(ValueError, match="set vllm_pd_model_kind to moe or dense"):
        engine_instances("prefill", 4, 2, [], 8100, kv_port=30000, model_kind=pd_model.resolve_kind("auto", facts["kind"]))


def test_model_facts_resolve_the_kind_over_the_files_of_this_machine(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_experts": 0}))
    facts = pd_model.model_facts(str(tmp_path), "auto")
    assert (facts["exists"], facts["kind"], facts["resolved_kind"]) == (True, "dense", "dense")
    assert pd_model.model_facts(str(tmp_path / "none"), "moe")["resolved_kind"] == "moe"
    assert pd_model.read_file(str(tmp_path / "none")) is None
