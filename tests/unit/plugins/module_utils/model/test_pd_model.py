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
