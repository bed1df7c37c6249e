import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import engine_env as E
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import pd_consistency as c
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.check_names import CHECKS
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases as R


@pytest.mark.parametrize("version, names", [
    # the Mooncake connector of these tags reads the NIXL name (vllm-ascend #7140) ...
    ("v0.11.0", [E.ABORT_NIXL]), ("v0.13.0", [E.ABORT_NIXL]), ("v0.13.0rc3", [E.ABORT_NIXL]),
    ("v0.17.0rc1", [E.ABORT_NIXL]), ("v0.18.0rc1", [E.ABORT_NIXL]), ("v0.7.3.post1", [E.ABORT_NIXL]),
    # ... and from the v0.18.0 release on its own name (PR #8617)
    ("v0.18.0", [E.ABORT_MOONCAKE]), ("0.18.0", [E.ABORT_MOONCAKE]), ("v0.19.1rc1", [E.ABORT_MOONCAKE]),
    ("v0.23.0", [E.ABORT_MOONCAKE]), ("v1.0.0rc1", [E.ABORT_MOONCAKE]),
    ("v0.18", [E.ABORT_MOONCAKE]),  # two numbers: v0.18.0
    # unknown release: both, so whichever is installed reads it
    (None, [E.ABORT_MOONCAKE, E.ABORT_NIXL]), ("", [E.ABORT_MOONCAKE, E.ABORT_NIXL]),
])
def test_abort_timeout_names_follow_the_release(version, names):
    assert E.abort_timeout_names(version) == names


@pytest.mark.parametrize("version", sorted(R.RELEASES))
def test_a_release_of_the_table_gets_the_name_its_connector_reads(version, monkeypatch):
    assert E.abort_timeout_names(version) == [R.RELEASES[version]["abort_env"]]
    # the table decides, not the version rule: a table that says otherwise is followed
    other = E.ABORT_NIXL if R.RELEASES[version]["abort_env"] == E.ABORT_MOONCAKE else E.ABORT_MOONCAKE
    monkeypatch.setitem(R.RELEASES, version, dict(R.RELEASES[version], abort_env=other))
    assert E.abort_timeout_names(version) == [other]


@pytest.mark.parametrize("bad", ["latest", "0.18.0-rc1x", "v0.x.0", "18"])
def test_a_release_that_is_no_version_is_an_error(bad):
    with pytest.raises(ValueError, match="is not a vllm-ascend release"):
        E.abort_timeout_names(bad)


@pytest.mark.parametrize("version, names", [
    # spellings the old engine_env parser refused, which the one parser (PEP 440) reads: an installed dev
    # build's local version (what pip show prints) no longer fails the env template
    ("0.18.0+empty", [E.ABORT_MOONCAKE]), ("0.17.0rc1.dev5+g1234", [E.ABORT_NIXL]), ("V0.18.0RC1", [E.ABORT_NIXL]),
    ("0.18.0-rc1", [E.ABORT_NIXL]), ("0.18.0.0.1", [E.ABORT_MOONCAKE]), ("0.18.0a1", [E.ABORT_NIXL]),
])
def test_every_pep440_spelling_gets_a_name(version, names):
    assert E.abort_timeout_names(version) == names


def test_versions_sort_like_releases():
    order = ["v0.18.0.dev1", "v0.18.0rc1", "v0.18.0rc2", "v0.18.0", "v0.18.0.post1", "v0.18.1rc1"]
    assert sorted(order, key=R.parse_version) == order


def test_retransmit_budget_is_the_mooncake_formula():
    # 4.096 us * 2^20 * 7 = 30064.77 ms; vllm-ascend adds 3000 ms to it (33064, issue #7846's timeout)
    assert int(E.retransmit_budget_ms(20, 7)) == 30064
    assert int(E.retransmit_budget_ms(14, 7)) == 469


@pytest.mark.parametrize("env, problem", [
    ({}, None),  # vllm-ascend derives the timeout
    ({"HCCL_RDMA_TIMEOUT": "14", "HCCL_RDMA_RETRY_CNT": "7"}, None),  # derived too
    ({"ASCEND_TRANSFER_TIMEOUT": "10000", "HCCL_RDMA_TIMEOUT": "14"}, None),  # 10000 > 469
    ({"ASCEND_TRANSFER_TIMEOUT": "10000"}, "ASCEND_TRANSFER_TIMEOUT=10000 ms is not above the RDMA retransmission "
     "budget 4.096 us * 2^20 * 7 = 30064 ms (HCCL_RDMA_TIMEOUT unset, 20, HCCL_RDMA_RETRY_CNT unset, 7)"),
    ({"ASCEND_TRANSFER_TIMEOUT": 3000, "HCCL_RDMA_TIMEOUT": 18, "HCCL_RDMA_RETRY_CNT": 5},
     "budget 4.096 us * 2^18 * 5 = 5368 ms (HCCL_RDMA_TIMEOUT 18, HCCL_RDMA_RETRY_CNT 5)"),
    ({"ASCEND_TRANSFER_TIMEOUT": "5368", "HCCL_RDMA_TIMEOUT": 18, "HCCL_RDMA_RETRY_CNT": 5}, "= 5368 ms"),
    ({"ASCEND_TRANSFER_TIMEOUT": "5369", "HCCL_RDMA_TIMEOUT": 18, "HCCL_RDMA_RETRY_CNT": 5}, None),
    ({"ASCEND_TRANSFER_TIMEOUT": "10s"}, "ASCEND_TRANSFER_TIMEOUT='10s' is not a whole number"),
])
def test_transfer_timeout_rule(env, problem):
    got = E.transfer_timeout_problem(env)
    if problem is None:
        assert got is None
    else:
        assert problem in got, got


def engine(host, kind, env):
    return {"host": host, "kind": kind, "tp": 8, "model": {}, "env": env, "address": host,
            "settings": c.effective_settings({}, [])}


def test_the_transfer_timeout_warning_is_named_does_not_refuse_and_names_the_hosts():
    short = {"ASCEND_TRANSFER_TIMEOUT": "10000"}
    fs = c.cluster_findings([engine("p1", "prefill", short), engine("d1", "decode", short),
                             engine("d2", "decode", {})])
    assert [f["name"] for f in fs] == ["TransferTimeoutShort"] and "TransferTimeoutShort" in CHECKS
    f = fs[0]
    assert f["warning"] is True and f["hosts"] == ["d1", "p1"]
    assert f["message"].startswith("[TransferTimeoutShort] prefill p1, decode d1: ASCEND_TRANSFER_TIMEOUT=10000 ms")
    failing, shown = c.split_ignored(fs, [])
    assert failing == [] and shown == fs
    assert c.split_ignored(fs, ["TransferTimeoutShort"]) == ([], [])
