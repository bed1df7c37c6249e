"""Code that reads the release table without a release, `runtime(None)` (the newest supported release's facts: the
host scripts, module_utils constants), is right on every supported release only while each fact it reads is the same
in all of them. This fails on such a read of a fact that differs between supported releases: that code must then be
given the release it serves (as the roles' pd_release_facts are)."""
import re
from pathlib import Path

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases

ROOT = Path(__file__).resolve().parents[2]
READ = re.compile(r'''runtime\(None\)\[["'](\w+)["']\]''')
# NAME = runtime(None), then NAME['key']
ALIAS = re.compile(r'''^\s*(\w+)\s*=\s*(?:releases\.)?runtime\(None\)\s*$''', re.M)


def newest_reads():
    """{table key: [file, ...]} of every key read from runtime(None) in plugins/ and roles/."""
    out = {}
    for top in ('plugins', 'roles'):
        for path in sorted((ROOT / top).rglob('*.py')):
            text = path.read_text(encoding='utf-8')
            keys = set(READ.findall(text))
            for name in ALIAS.findall(text):
                keys |= set(re.findall(r'''\b%s\[["'](\w+)["']\]''' % re.escape(name), text))
            for key in keys:
                out.setdefault(key, []).append(str(path.relative_to(ROOT)))
    return out


def test_the_scan_sees_the_known_readers():
    reads = newest_reads()
    # a host script, a module_utils constant and an alias (proxy_member.py: UP = runtime(None)); the scan is not blind
    assert 'roles/engine/files/probe_drained.py' in reads['busy_gauges']
    assert 'plugins/module_utils/common/secrets.py' in reads['api_key_env']
    assert 'roles/proxy/files/proxy_member.py' in reads['proxy_wait_flags']
    assert len(reads) >= 15


def test_every_fact_read_without_a_release_is_the_same_in_every_supported_release():
    supported = [(v, e) for v, e in sorted(releases.RELEASES.items()) if e['status'] == 'supported']
    assert len(supported) >= 2
    differ = ['%s (read by %s): %s' % (key, ', '.join(files), '; '.join('%s %r' % (v, e.get(key)) for v, e in supported))
              for key, files in sorted(newest_reads().items())
              if any(e.get(key) != supported[0][1].get(key) for _v, e in supported)]
    assert differ == [], 'give that code the release it serves instead of runtime(None)'
