"""pd_release_facts(newest=true): what the roles talk to upstream with, for any version string."""
from ansible_collections.vllm_pd.ascend.plugins.filter.pd_release_facts import pd_release_facts
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases


def test_newest_falls_back_to_the_newest_supported_release():
    newest = releases.RELEASES[releases.supported_versions()[0]]
    for version in ('', None, 'latest', '0.99.0'):
        assert pd_release_facts(version, newest=True) == dict(newest)
    assert pd_release_facts('v0.18.0', newest=True) == dict(releases.RELEASES['0.18.0'])


def test_without_newest_an_empty_version_has_no_facts():
    assert pd_release_facts('') == {}
    assert pd_release_facts('0.99.0') == {}
