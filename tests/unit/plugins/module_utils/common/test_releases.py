import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases as R


@pytest.mark.parametrize("older, newer", [
    ("0.9.1", "0.11.0"), ("0.23.0.dev1", "0.23.0rc1"), ("0.23.0rc1", "0.23.0"), ("0.23.0", "0.23.0.post1"),
    ("v0.18.0", "0.23.0"), ("0.18.0rc1", "v0.18.0"), ("0.23.0.post1", "0.23.1"), ("0.23", "0.23.0.post1"),
])
def test_versions_sort_as_pep440(older, newer):
    assert R.parse_version(older) < R.parse_version(newer)


def test_spellings_of_one_release_are_equal():
    assert R.parse_version("v0.18.0") == R.parse_version("0.18") == R.parse_version("0.18.0")
    assert R.normalize("v0.18.0") == "0.18.0" and R.normalize("0.23.0-post1") == "0.23.0.post1"


def test_a_post_release_is_its_base_release_for_the_cann_check():
    assert R.base_release("0.23.0.post1") == "0.23.0"
    assert R.cann_for("0.23.0.post1") == R.cann_for("v0.23.0") == "9.1.0"
    assert R.cann_for("v0.23.0rc1") == "9.0.1"          # a release candidate: CANN known, refused
    assert R.cann_for("0.5.0") is None


@pytest.mark.parametrize("version", ["0.23.0.post1", "0.23.0", "v0.18.0"])
def test_supported_releases_pass(version):
    assert R.support_problem(version) is None


@pytest.mark.parametrize("version, words", [
    ("0.13.0", "renumbers"), ("0.11.0", "no /instances admin API"), ("0.9.1", "not a release this collection"),
    ("0.23.0rc1", "not a release this collection"), ("latest", "not a release version"),
])
def test_other_releases_are_refused_with_the_reason(version, words):
    problem = R.support_problem(version)
    assert words in problem and "Fix:" in problem


def test_every_release_has_every_fact():
    keys = set(R.RELEASES["0.23.0.post1"])
    for version, entry in R.RELEASES.items():
        assert set(entry) - {"reason"} == keys - {"reason"}, version
        assert entry["status"] in ("supported", "refused")
        assert entry["status"] == "supported" or entry["reason"]
