"""kv-transfer-config parsing and vLLM-Ascend's start-up checks [facts §3], port formula [facts §2a]."""
import json

import pytest

from vllm_standin import config

GOOD = {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer", "kv_port": "30000",
        "kv_connector_extra_config": {"prefill": {"tp_size": 8, "dp_size": 1}, "decode": {"tp_size": 8, "dp_size": 1}}}


def cfg(**changes):
    c = json.loads(json.dumps(GOOD))
    c.update(changes)
    return config.parse_kv_transfer_config(json.dumps(c))


def test_string_kv_port_becomes_int_like_pydantic_lax_mode():
    assert cfg()["kv_port"] == 30000


def test_unknown_top_level_key_is_rejected():
    with pytest.raises(config.ConfigError, match="kv_ports\n  Extra inputs are not permitted"):
        cfg(kv_ports=1)


def test_kv_ip_is_accepted_but_means_nothing():
    assert cfg(kv_ip="10.0.0.1")["kv_ip"] == "10.0.0.1"


def test_bad_role_and_connector():
    with pytest.raises(config.ConfigError, match="Unsupported kv_role"):
        cfg(kv_role="producer")
    with pytest.raises(config.ConfigError, match="MooncakeConnector"):
        cfg(kv_connector="MooncakeConnector")


@pytest.mark.parametrize("tp,dp,match", [
    (4, 1, "'prefill' config has a conflicting tensor parallel size 8"),
    (8, 2, "'prefill' config has a conflicting data parallel size 1"),
])
def test_producer_extra_config_must_match_what_it_launches(tp, dp, match):
    with pytest.raises(config.ConfigError, match=match):
        config.check_parallel(cfg(), tp, dp)


def test_consumer_is_checked_against_decode_block():
    c = cfg(kv_role="kv_consumer")
    c["kv_connector_extra_config"]["decode"]["tp_size"] = 4
    config.check_parallel(c, 4, 1)
    with pytest.raises(config.ConfigError, match="'decode' config has a conflicting tensor parallel size 4"):
        config.check_parallel(c, 8, 1)


def test_prefill_tp_below_decode_tp_and_indivisible():
    c = cfg()
    c["kv_connector_extra_config"]["decode"]["tp_size"] = 16
    with pytest.raises(config.ConfigError, match="greater than or equal"):
        config.check_parallel(c, 8, 1)
    c["kv_connector_extra_config"]["decode"]["tp_size"] = 3
    with pytest.raises(config.ConfigError, match="divisible"):
        config.check_parallel(c, 8, 1)


def test_missing_blocks_are_assertions():
    c = cfg()
    del c["kv_connector_extra_config"]["decode"]
    with pytest.raises(config.ConfigError, match="must contain 'decode'"):
        config.check_parallel(c, 8, 1)


def test_engine_id_gets_a_suffix_per_process():
    a, b = config.engine_id({"engine_id": "same"}), config.engine_id({"engine_id": "same"})
    assert a.startswith("same-") and b.startswith("same-") and a != b


def test_port_group_formula():
    assert config.handshake_ports(28002, 0, 8) == list(range(28002, 28010))
    assert config.handshake_ports(28002, 1, 8) == list(range(28010, 28018))
    assert config.handshake_ports(30000, 1, 4, pp_size=2) == list(range(30008, 30016))
    assert config.side_channel_port(30000, 3, 2, 1, 2) == 30012


def test_prefill_pp_size_is_read_not_checked_against_the_own_pp_and_decode_pp_must_be_1():
    # vllm-ascend 0.23: check_kv_extra_config compares tp and dp only; the connector asserts decode pp 1
    c = cfg()
    c["kv_connector_extra_config"]["prefill"]["pp_size"] = 2
    config.check_parallel(c, 8, 1)
    c["kv_connector_extra_config"]["decode"]["pp_size"] = 2
    with pytest.raises(config.ConfigError, match="decode pp size must be 1"):
        config.check_parallel(c, 8, 1)


@pytest.mark.parametrize("tp, pp, pcp, rank", [(2, 2, 1, 0), (2, 2, 1, 1), (1, 1, 2, 3), (2, 2, 2, 1)])
def test_handshake_ports_follow_the_connector(tp, pp, pcp, rank):
    assert config.handshake_ports(30000, rank, tp, pp, pcp) == [
        30000 + rank * tp * pp * pcp + (p * pcp + c) * tp + t for p in range(pp) for c in range(pcp) for t in range(tp)]
