# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How module pd_host_read reads the release installed in the Python of each engine kind of a host: the
commands, one per distinct binary and image (read_targets), the script they run (SCRIPT) and what each
answer says (release_record). Pure functions."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

# The vllm-ascend and vLLM releases in the Python that runs the vllm binary $1: the interpreter of its #! line
# (pip's launcher for long paths: #!/bin/sh, then '''exec' PYTHON "$0" "$@"). Prints one JSON line. A shell
# script, not Python: it runs in the engine image too (container runtime), whose Python is only known from $1.
SCRIPT = r"""b=$(command -v "$1") || { echo "$1 is not on PATH" >&2; exit 3; }
IFS= read -r line < "$b" || [ -n "$line" ] || { echo "cannot read $b" >&2; exit 4; }
case $line in '#!'*) ;; *) echo "$b has no #! line (not a Python entry point)" >&2; exit 4 ;; esac
py=${line#??}
case $py in
  */sh|*/sh\ *|*/bash|*/bash\ *) py=$(sed -n "2s/^'''exec' \\([^ ]*\\) .*/\\1/p" "$b") ;;
esac
[ -n "$py" ] || { echo "$b: no Python interpreter in its first lines" >&2; exit 4; }
exec $py -c 'import json, sys
try:
    from importlib import metadata
except ImportError:
    import importlib_metadata as metadata
out = {"python": sys.executable}
for name in ("vllm-ascend", "vllm"):
    try:
        out[name] = metadata.version(name)
    except Exception:
        out[name] = None
print(json.dumps(out))'
"""


def read_targets(kinds):
    """What pd_host_read runs to read the release of each engine kind of a host: KINDS is [{kind, binary,
    runtime, container_engine, container_image}] (the kinds of the host, resolved settings). One read per
    distinct binary (and engine and image for the container runtime): P and D of one host usually share it.
    -> [{key, kinds, argv}]."""
    out = []
    for k in kinds:
        binary = k['binary']
        container = k['runtime'] == 'container'
        prefix = [k['container_engine'], 'run', '--rm', '--net=none', '--entrypoint', 'sh', k['container_image']] \
            if container else ['sh']
        key = '%s %s %s' % (prefix[0], prefix[-1], binary) if container else binary
        same = [t for t in out if t['key'] == key]
        if same:
            same[0]['kinds'].append(k['kind'])
        else:
            out.append({'key': key, 'kinds': [k['kind']], 'argv': prefix + ['-c', SCRIPT, 'sh', binary]})
    return out


def release_record(key, rc, stdout, stderr, msg=''):
    """What one read (KEY of read_targets) says: {vllm_ascend, vllm (null when not installed), python, error (why
    nothing could be read, else null), where (KEY)}. MSG: why the command did not run (no such engine)."""
    record = dict(vllm_ascend=None, vllm=None, python=None, error=None, where=key)
    text = (stdout or '').strip().splitlines()
    try:
        found = json.loads(text[-1]) if rc == 0 and text else None
    except ValueError:
        found = None
    if isinstance(found, dict):
        record.update(vllm_ascend=found.get('vllm-ascend'), vllm=found.get('vllm'), python=found.get('python'))
    else:
        why = (stderr or msg or '').strip()[-300:]
        record['error'] = '`%s` (rc %s): %s' % (key, rc, why or (stdout or '').strip()[-300:])
    return record
