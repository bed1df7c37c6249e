"""The upstream source of each release of the release table, unpacked once for the contract tests.

scripts/fetch-upstream caches the archives (vllm-ascend and vLLM sdists, the Mooncake wheel); this
unpacks only the files the contracts read (Python source, the Dockerfile, the versioning policy) into
.cache/upstream-src/<archive name>/, once: a later session reuses a tree whose stamp names the same
archive checksum and the same member filter.
"""
import importlib.util
import os
import re
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The collection as ansible_collections.vllm_pd.ascend (the unit tests' way, shared).
_spec = importlib.util.spec_from_file_location('_vllm_pd_units_conftest', ROOT / 'tests' / 'unit' / 'conftest.py')
_units = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_units)

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases  # noqa: E402

CACHE = Path(os.environ.get('VLLM_PD_UPSTREAM_CACHE') or ROOT / '.cache' / 'upstream')
SRC = ROOT / '.cache' / 'upstream-src'
# Members to unpack, relative to the archive's top directory (the wheel has none). Python source of the
# packages, the proxy example, the image build and the versioning policy: nothing else is read.
KEEP = re.compile(r'^(?:vllm|vllm_ascend|mooncake|examples/disaggregated_prefill_v1)/.*\.py$'
                  r'|^Dockerfile$|^docs/source/community/versioning_policy\.md$'
                  r'|^mooncake/engine\.so$')
_FILTER_VERSION = KEEP.pattern


def _archive(name, version, suffix):
    stem = name.replace('-', '_')
    hits = sorted(p for p in CACHE.glob('%s-%s%s' % (stem, version, suffix)) if not p.name.endswith('.sha256'))
    if not hits:
        pytest.fail('%s %s is not in the upstream cache %s. Fix: run scripts/fetch-upstream (it caches every '
                    'release of the table; VLLM_PD_UPSTREAM_CACHE names another cache)' % (name, version, CACHE))
    return hits[0]


def _safe_target(dest, rel):
    target = (dest / rel).resolve()
    if dest.resolve() not in target.parents:
        raise ValueError('archive member %r leaves the unpack directory' % rel)
    return target


def _unpack(archive):
    """The unpacked tree of ARCHIVE (kept members only), reused when its stamp matches."""
    dest = SRC / archive.name
    stamp = dest / '.unpacked'
    sha_file = Path(str(archive) + '.sha256')
    want = '%s %s\n' % (sha_file.read_text().split()[0] if sha_file.exists() else archive.stat().st_mtime,
                        _FILTER_VERSION)
    if stamp.exists() and stamp.read_text() == want:
        return dest
    tmp = SRC / (archive.name + '.partial')
    if tmp.exists():
        _rmtree(tmp)
    tmp.mkdir(parents=True)
    if archive.name.endswith('.whl'):
        with zipfile.ZipFile(str(archive)) as z:
            for info in z.infolist():
                if not info.is_dir() and KEEP.match(info.filename):
                    target = _safe_target(tmp, info.filename)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(z.read(info))
    else:
        with tarfile.open(str(archive)) as t:
            for member in t:
                rel = member.name.split('/', 1)[1] if '/' in member.name else ''
                if member.isfile() and KEEP.match(rel):
                    target = _safe_target(tmp, rel)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(t.extractfile(member).read())
    (tmp / '.unpacked').write_text(want)
    if dest.exists():
        _rmtree(dest)
    tmp.rename(dest)
    return dest


def _rmtree(path):
    shutil.rmtree(str(path))


def upstream_tree(name, version):
    """The unpacked tree of one cached archive (vllm_ascend or vllm sdist)."""
    return _unpack(_archive(name, version, '.tar.gz'))


class Upstream(object):
    """One release of the table with its unpacked trees: va (vllm-ascend), vl (vLLM), mc (Mooncake wheel or None)."""

    def __init__(self, version):
        self.version = version
        self.entry = releases.RELEASES[version]
        self.va = upstream_tree('vllm_ascend', version)
        self.vl = upstream_tree('vllm', self.entry['vllm'])
        wheel = self.entry.get('mooncake_wheel')
        self.mc = _unpack(_archive('mooncake_transfer_engine_non_cuda', wheel, '-*.whl')) if wheel else None

    @property
    def connector(self):
        """The Mooncake connector module file the table names (connector_module)."""
        return self.va / (self.entry['connector_module'].replace('.', '/') + '.py')

    @property
    def proxy(self):
        return self.va / self.entry['proxy_path']
