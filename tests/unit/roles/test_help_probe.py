# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether vllm serve has --shutdown-timeout: the release table for a supported release read in the engine's Python
next to its vLLM, else the installed vllm serve's --help=all (else --help), run here on a fake binary."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
COLLECTIONS_ROOT = next(p for p in sys.path if os.path.isdir(os.path.join(p, 'ansible_collections', 'vllm_pd', 'ascend')))
# what the fake `vllm serve` prints for each help option (absent: it exits 2 as an unknown option)
FAKE = """#!/bin/sh
echo "$*" >> "$0.calls"
case "$2" in
--help=all) [ -n "$HELP_ALL" ] && { printf '%s\\n' "$HELP_ALL"; exit 0; } ;;
--help) [ -n "$HELP" ] && { printf '%s\\n' "$HELP"; exit 0; } ;;
esac
echo "vllm: error: unrecognized arguments: $2" >&2
exit 2
"""


def probe(tmp_path, installed, help_all=None, plain=None):
    vllm = tmp_path / 'vllm'
    vllm.write_text(FAKE)
    vllm.chmod(0o755)
    host = dict(engine_kind='prefill', engine_runtime='systemd', engine_vllm_binary=str(vllm), engine_shutdown_timeout=60,
                engine_dp_args=[], engine_cluster='c1', engine_unit='vllm-pd-prefill.service',
                engine_container_engine='podman', engine_container_image='', vllm_pd_release={'prefill': installed},
                ansible_python_interpreter=sys.executable)
    (tmp_path / 'inv.json').write_text(json.dumps({'all': {'hosts': {'p1': host}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_ROOT, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, 'ansible.cfg'),
               HELP_ALL=help_all or '', HELP=plain or '')
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', str(tmp_path / 'inv.json'),
                        os.path.join(HERE, 'probe_help.yml'), '-e', 'out=%s' % tmp_path],
                       capture_output=True, text=True, cwd=REPO_ROOT, env=env, check=False)
    calls = (tmp_path / 'vllm.calls').read_text().split('\n')[:-1] if (tmp_path / 'vllm.calls').exists() else []
    result = json.loads((tmp_path / 'result.json').read_text()) if r.returncode == 0 else None
    return r, result, calls


def test_a_supported_release_next_to_its_vllm_is_not_asked(tmp_path):
    # the fake refuses every help option: asking it would fail the run
    r, result, calls = probe(tmp_path, {'vllm_ascend': '0.18.0', 'vllm': '0.18.0'})
    assert r.returncode == 0, r.stdout[-3000:]
    assert (result['has'], calls) == (True, [])


@pytest.mark.parametrize('help_all, plain, has, asked', [
    ('  --shutdown-timeout SHUTDOWN_TIMEOUT', None, True, ['serve --help=all']),
    # --shutdown-timeout-s is another option; a release before --help=all lists every option on --help
    ('  --shutdown-timeout-s S', None, False, ['serve --help=all']),
    (None, '  --port PORT', False, ['serve --help=all', 'serve --help']),
    (None, '  --shutdown-timeout N', True, ['serve --help=all', 'serve --help']),
])
def test_any_other_release_is_asked_once(tmp_path, help_all, plain, has, asked):
    r, result, calls = probe(tmp_path, {'vllm_ascend': '0.13.0', 'vllm': '0.13.0'}, help_all, plain)
    assert r.returncode == 0, r.stdout[-3000:]
    assert (result['has'], calls) == (has, asked)
    assert result['options'] == {str(tmp_path / 'vllm') + ' serve': has}


def test_a_vllm_serve_that_prints_no_help_stops_the_run_with_the_fix(tmp_path):
    r, _result, calls = probe(tmp_path, {})
    assert r.returncode != 0 and calls == ['serve --help=all', 'serve --help']
    assert 'The run reads it to know whether this release has --shutdown-timeout' in r.stdout
    assert 'set vllm_pd_shutdown_timeout: 0' in r.stdout
