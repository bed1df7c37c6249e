"""The stand-in's output depends on the KV it read (issue 15): P alone and D after a right transfer
agree; corrupted, missing or differently laid out KV changes D's text. Dense models follow vLLM's
DP rank reset in the port formula."""
import json

import pytest

from vllm_standin import api, config, consumer, kvcache

PROMPT = kvcache.tokenize("the quick brown fox " * 70)  # 280 tokens: 3 blocks of 128


def pulled(tokens, ranks, block_size=kvcache.BLOCK_SIZE, p_block_size=kvcache.BLOCK_SIZE):
    n = kvcache.num_blocks_for(tokens, p_block_size)
    return {r: [kvcache.block_content(tokens, r, i, p_block_size) for i in range(n)] for r in range(ranks)}


def test_right_transfer_reads_like_computed_kv_so_outputs_match():
    kv = kvcache.read_kv(PROMPT, pulled(PROMPT, 4))
    assert kv == kvcache.computed_kv(PROMPT)
    assert api.generate(PROMPT, 16, kv) == api.generate(PROMPT, 16, kvcache.computed_kv(PROMPT))


def test_one_corrupted_byte_changes_the_output():
    blocks = pulled(PROMPT, 4)
    blocks[2][1] = consumer.corrupt(blocks[2][1])
    kv = kvcache.read_kv(PROMPT, blocks)
    assert kv != kvcache.computed_kv(PROMPT)
    assert api.generate(PROMPT, 16, kv) != api.generate(PROMPT, 16, kvcache.computed_kv(PROMPT))


def test_block_size_only_on_d_garbles_the_kv():
    kv = kvcache.read_kv(PROMPT, pulled(PROMPT, 2, p_block_size=128), block_size=64)
    assert kv != kvcache.computed_kv(PROMPT)


def test_missing_transfer_reads_nothing():
    assert kvcache.read_kv(PROMPT, {}) != kvcache.computed_kv(PROMPT)


def test_generation_is_deterministic_and_not_one_token():
    words = api.generate(PROMPT, 16, kvcache.computed_kv(PROMPT))
    assert words == api.generate(PROMPT, 16, kvcache.computed_kv(PROMPT))
    assert len(words) == 16 and len(set(words)) > 1


@pytest.mark.parametrize("cfg, moe", [
    ({"num_experts": 8}, True), ({"text_config": {"n_routed_experts": 4}}, True),
    ({"hidden_size": 8}, False), ({"num_experts": None}, False), (None, None),
])
def test_is_moe_follows_vllm(cfg, moe):
    assert config.is_moe(cfg) is moe


def test_dense_dp_ranks_all_use_rank_zero_ports():
    assert config.port_dp_ranks([2, 3], True) == [2, 3]
    assert config.port_dp_ranks([2, 3], None) == [2, 3]  # no model config: the lab's old MoE behaviour
    assert config.port_dp_ranks([1], False) == [0]
    ports = [p for r in config.port_dp_ranks([0, 1], False) for p in config.handshake_ports(30000, r, 2)]
    assert ports == [30000, 30001, 30000, 30001]  # one engine with dense internal DP collides with itself


def test_read_model_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_local_experts": 2}))
    assert config.is_moe(config.read_model_config(str(tmp_path)))
    assert config.read_model_config(str(tmp_path / "none")) is None
