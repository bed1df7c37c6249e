import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases as R


@pytest.mark.parametrize("older, newer", [
    ("0.9.1", "0.11.0"), ("0.23.0.dev1", "0.23.0rc1"), ("0.23.0rc1", "0.23.0"), ("0.23.0", "0.23.0.post1"),
    ("v0.18.0", "0.23.0"), ("0.18.0rc1", "v0.18.0"), ("0.23.0.post1", "0.23.1"), ("0.23", "0.23.0.post1"),
])
def test_versions_sort_as_pep440(older, newer):
    assert R.parse_version(older) < R.parse_version(newer)


@pytest.mark.parametrize("older, newer", [
    # pre-releases: dev < a < b < rc < final; post releases after the final, in order
    ("0.18.0.dev1", "0.18.0a1"), ("0.18.0a1", "0.18.0b1"), ("0.18.0b2", "0.18.0rc1"), ("0.18.0rc1", "0.18.0rc2"),
    ("0.18.0rc2", "0.18.0"), ("0.18.0.post1", "0.18.0.post2"), ("0.18.0.post1.dev1", "0.18.0.post1"),
    ("0.18.0rc1.post1", "0.18.0"), ("0.18.0.post9", "0.18.1.dev0"), ("0.18.0", "0.18.0.0.1"), ("0.9.9", "0.10"),
])
def test_pre_and_post_releases_sort_as_pep440(older, newer):
    assert R.parse_version(older) < R.parse_version(newer)


@pytest.mark.parametrize("spelling", ["v0.18.0rc1", "V0.18.0RC1", "0.18.0-rc1", "0.18.0.rc1", "0.18.0_rc1", " 0.18rc1 ",
                                      "0.18.0.0rc1"])
def test_spellings_of_one_pre_release_are_equal(spelling):
    assert R.parse_version(spelling) == R.parse_version("0.18.0rc1")
    assert R.normalize(spelling) in ("0.18.0rc1", "0.18rc1", "0.18.0.0rc1")


def test_a_post_release_spelled_three_ways_and_a_local_version():
    assert R.parse_version("0.23.0.post1") == R.parse_version("0.23.0post1") == R.parse_version("0.23.0-post1")
    # a local version (a vLLM built for a plugin: 0.18.0+empty) compares as its public version
    assert R.parse_version("0.18.0+empty") == R.parse_version("0.18.0")
    assert R.base_release("0.18.0+empty") == "0.18.0"


@pytest.mark.parametrize("bad", ["18", "v18", "latest", "", "v", "0.x.0", "0.18.0-rc1x", "1!0.18.0", "0.18.0 rc1",
                                 "0.18.", ".18.0", "0.18.0+", None])
def test_what_is_no_release_is_a_value_error(bad):
    """One parser for the release table and the inventory rule: a single number (18) is no release for either."""
    with pytest.raises(ValueError, match="is not a vllm-ascend release"):
        R.parse_version(bad)


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


def _e(host, kind, va, vl, **kw):
    return dict(dict(host=host, kind=kind, vllm_ascend=va, vllm=vl, python='/usr/bin/python3'), **kw)


def test_one_supported_release_on_every_engine_passes():
    engines = [_e("p1", "prefill", "0.23.0.post1", "0.23.0"), _e("d1", "decode", "0.23.0.post1", "0.23.0")]
    assert R.installed_findings("c1", engines) == []
    assert R.installed_findings("c1", engines, "0.23.0.post1") == []
    assert R.installed_findings("c1", [_e("p1", "prefill", "0.18.0", "0.18.0+empty")], "v0.18.0") == []


@pytest.mark.parametrize("va, vl, words", [
    ("0.13.0", "0.13.0", "renumbers"), ("0.11.0", "0.11.0", "no /instances admin API"),
    ("0.99.0", "0.99.0", "not a release this collection"), (None, "0.23.0", "no vllm-ascend distribution"),
    ("0.23.0.post1", "0.18.0", "built for vLLM 0.23.0"), ("0.23.0.post1", None, "has no vLLM"),
])
def test_an_unsupported_installed_release_is_refused_by_name(va, vl, words):
    found = R.installed_findings("c1", [_e("p1", "prefill", va, vl)])
    assert [f["name"] for f in found] == ["UnsupportedRelease"]
    assert words in found[0]["message"] and "host p1 prefill" in found[0]["message"] and "Fix:" in found[0]["message"]


def test_an_unreadable_release_is_refused_with_the_reason():
    found = R.installed_findings("c1", [dict(host="p1", kind="prefill", error="no vllm on PATH")])
    assert [f["name"] for f in found] == ["UnsupportedRelease"] and "no vllm on PATH" in found[0]["message"]


def test_p_and_d_on_different_releases_are_a_mismatch():
    engines = [_e("p1", "prefill", "0.23.0.post1", "0.23.0"), _e("d1", "decode", "0.18.0", "0.18.0")]
    found = R.installed_findings("c1", engines)
    assert [f["name"] for f in found] == ["ReleaseMismatch"]
    assert "0.18.0 on host d1 decode; 0.23.0.post1 on host p1 prefill" in found[0]["message"]


def test_the_inventory_release_is_compared_with_the_installed_one():
    engines = [_e("p1", "prefill", "0.18.0", "0.18.0"), _e("d1", "decode", "0.18.0", "0.18.0")]
    found = R.installed_findings("c1", engines, "v0.23.0")
    assert [f["name"] for f in found] == ["ReleaseMismatch"]
    assert "vllm_pd_vllm_ascend_version is 0.23.0" in found[0]["message"] and "runs 0.18.0" in found[0]["message"]


@pytest.mark.parametrize("version, env, keeps", [
    ("0.23.0.post1", {}, False), ("0.23.0", {"VLLM_ASCEND_BALANCE_SCHEDULING": "1"}, True), ("0.13.0", {}, True), ("0.11.0", {}, True),
    ("0.18.0", {}, False), ("0.18.0", {"VLLM_ASCEND_BALANCE_SCHEDULING": "1"}, True),
    ("0.18.0", {"VLLM_ASCEND_BALANCE_SCHEDULING": "0"}, False), ("", {}, False), ("0.99.0", {}, False),
])
def test_dense_dp_rank_follows_the_release_and_its_environment(version, env, keeps):
    assert R.dense_dp_keeps_rank(version, env) is keeps


def test_the_extra_config_example_of_the_inventory_rule_is_a_key_every_supported_release_reads():
    import inspect
    import re
    from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import rules_runtime
    m = re.search(r"e\.g\. %s: \{(\w+): \{(\w+):", inspect.getsource(rules_runtime))
    assert m, "the fix text of vllm_pd_kv_connector_extra gives no example key"
    for version in R.supported_versions():
        assert "%s.%s" % m.groups() in R.RELEASES[version]["extra_config_keys"], version


@pytest.mark.parametrize('va, vl, has', [
    # a supported release next to the vLLM it is built for: the table answers (no `vllm serve --help=all`)
    ('0.23.0.post1', '0.23.0', True), ('v0.18.0', '0.18.0', True), ('0.23.0', '0.23.0.post1', True),
    # anything else: None, the engine role reads the help
    ('0.18.0', '0.13.0', None),          # beside another vLLM
    ('0.13.0', '0.13.0', None),          # refused
    ('0.11.0', '0.11.0', None),
    ('0.99.0', '0.99.0', None),          # unknown
    ('0.23.0rc1', '0.23.0', None),       # a release candidate
    (None, '0.23.0', None), ('0.23.0', None, None), (None, None, None),  # not read
    ('latest', '0.23.0', None), ('0.23.0', 'main', None),  # no version
])
def test_the_table_says_whether_vllm_serve_has_shutdown_timeout_only_for_a_supported_release_and_its_vllm(va, vl, has):
    assert R.serve_has_shutdown_timeout(va, vl) is has


def test_the_table_answer_is_each_supported_releases_own_fact():
    for version in R.supported_versions():
        entry = R.RELEASES[version]
        assert R.serve_has_shutdown_timeout(version, entry['vllm']) is entry['shutdown_timeout']
