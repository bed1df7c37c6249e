"""The upstream source of each release of the release table, as the contract tests' fixture (upstream_src.py)."""
import pytest

from upstream_src import Upstream, releases

_CACHE = {}


@pytest.fixture(params=sorted(releases.RELEASES, key=releases.parse_version, reverse=True))
def upstream(request):
    version = request.param
    if version not in _CACHE:
        _CACHE[version] = Upstream(version)
    return _CACHE[version]
