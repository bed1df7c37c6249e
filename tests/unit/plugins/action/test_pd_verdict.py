# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action pd_verdict through ansible-playbook: shown like debug, a refusal fails the host with its message, and it
runs nothing on the host (the inventory's host is reached only through a ProxyCommand that fails: nothing is dialled,
and anything sent to it would make the host unreachable)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COLLECTIONS_ROOT = next(p for p in sys.path if os.path.isdir(os.path.join(p, 'ansible_collections', 'vllm_pd', 'ascend')))


def play(tmp_path, args):
    (tmp_path / 'play.json').write_text(json.dumps([{'hosts': 'all', 'gather_facts': False, 'tasks': [
        {'name': 'verdict', 'vllm_pd.ascend.pd_verdict': args}]}]))
    (tmp_path / 'inv.json').write_text(json.dumps({'all': {'hosts': {'h1': {
        'ansible_host': '127.0.0.1', 'ansible_connection': 'ssh', 'ansible_ssh_common_args': '-o ProxyCommand=false'}}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_ROOT, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, 'ansible.cfg'),
               ANSIBLE_STDOUT_CALLBACK='default', ANSIBLE_CALLBACK_RESULT_FORMAT='json')
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', str(tmp_path / 'inv.json'),
                           str(tmp_path / 'play.json')], capture_output=True, text=True, cwd=REPO_ROOT, env=env, check=False)


def test_show_refuse_and_nothing_run_on_the_host(tmp_path):
    r = play(tmp_path, {'show': ['WARNING one', 'WARNING two']})
    assert r.returncode == 0 and '"WARNING one"' in r.stdout and 'unreachable=0' in r.stdout, r.stdout
    r = play(tmp_path, {'show': [], 'refuse': []})
    assert r.returncode == 0 and 'ok=1' in r.stdout and 'WARNING' not in r.stdout, r.stdout
    r = play(tmp_path, {'show': 'WARNING kept', 'refuse': ['cluster a refused:', 'the cause. Fix: this']})
    assert r.returncode == 2 and 'failed=1' in r.stdout and 'unreachable=0' in r.stdout, r.stdout
    assert '"cluster a refused:"' in r.stdout and '"shown": "WARNING kept"' in r.stdout, r.stdout
