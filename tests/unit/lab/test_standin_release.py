"""The stand-in behaves as the release it is installed as (lab/install-standin, lab_vllm_ascend_release)."""
import pytest

from vllm_standin import cli, release

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import bench_kv


@pytest.mark.parametrize("version", sorted(releases.RELEASES))
def test_its_kv_line_is_the_release_format_and_the_collection_parses_it(version):
    entry = release.facts(version)
    fmt, values = release.kv_line_args(entry, "cmpl-x-0-1a2b3c4d", 3.5, "10.0.0.2", 1, "10.0.0.1:15001", 6)
    line = fmt % values
    assert fmt == releases.RELEASES[version]["kv_log"]
    assert ("(1 groups, 6 blocks)" in line) == ("groups" in releases.RELEASES[version]["kv_log"])
    assert bench_kv.parse_line(line)["ms"] == 3.5


@pytest.mark.parametrize("version", sorted(releases.RELEASES))
def test_shutdown_timeout_is_an_option_only_where_the_release_has_it(version):
    parser = cli._parser(release.facts(version))
    argv = ["serve", "/m", "--kv-transfer-config", "{}", "--shutdown-timeout", "5"]
    if releases.RELEASES[version]["shutdown_timeout"]:
        assert parser.parse_args(argv).shutdown_timeout == 5
    else:
        with pytest.raises(SystemExit):  # vLLM: unrecognized arguments
            parser.parse_args(argv)


def test_an_unknown_release_behaves_as_the_newest_supported_one():
    assert release.facts("0.99.0") == releases.RELEASES[releases.supported_versions()[0]]
    assert release.facts("latest") == releases.RELEASES[releases.supported_versions()[0]]


def test_the_dense_dp_rank_follows_the_release_and_its_environment():
    assert release.dense_keeps_rank(release.facts("0.23.0.post1"), {}) is False
    assert release.dense_keeps_rank(release.facts("0.13.0"), {}) is True
    assert release.dense_keeps_rank(release.facts("0.18.0"), {}) is False
    assert release.dense_keeps_rank(release.facts("0.18.0"), {"VLLM_ASCEND_BALANCE_SCHEDULING": "1"}) is True
