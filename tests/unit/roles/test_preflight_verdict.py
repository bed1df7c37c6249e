# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's one task of warnings and refusals (roles/preflight/tasks/host.yml, issue 36) shows each
message of the tasks they replaced word for word: their vars, evaluated as written by ansible-playbook on the
controller over a host with one finding of every kind; nothing runs on a host."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
COLLECTIONS_ROOT = next(p for p in sys.path if os.path.isdir(os.path.join(p, 'ansible_collections', 'vllm_pd', 'ascend')))
# one task shows the warnings and refuses (action pd_verdict): its vars hold both lists
WARN_TASK = REFUSE_TASK = "Show this host's warnings"
FACTS = {
    'vllm_pd_cluster': 'c1', 'vllm_pd_vllm_ascend_version': '',
    '__preflight_ignore': ['ApiPortInUse', 'ReleaseMismatch', 'HccnConfMismatch', 'ModelMismatch'],
    '__preflight_orphans': ['vllm-pd-decode-old.service'], 'preflight_remove_orphans': False,
    '__preflight_proxy_live': {'skipped': True},
    '__preflight_release': [{'name': 'ReleaseMismatch', 'message': '[ReleaseMismatch] r1'},
                            {'name': 'UnsupportedRelease', 'message': '[UnsupportedRelease] r2'}],
    '__preflight_fit': [{'name': 'TransferTimeoutShort', 'warning': True, 'message': '[TransferTimeoutShort] w'},
                        {'name': 'ModelMismatch', 'message': '[ModelMismatch] i'},
                        {'name': 'TpMismatch', 'message': '[TpMismatch] f'}],
    '__preflight_npu_mine': [{'check': 'NpuToolsMissing', 'msg': 'no tools'}, {'check': 'HccnConfMismatch', 'msg': 'conf'},
                             {'check': 'NpuLinkDown', 'msg': 'down 1'}, {'check': 'NpuLinkDown', 'msg': 'down 2'}],
    '__preflight_is_proxy': True, '__preflight_front': True, 'proxy_front': 'haproxy', '__preflight_planned': [],
    '__engine_host_read': {'proxy_python': {'problems': ['no module fastapi']},
                           'proxy_front': {'found': False, 'binary': '/usr/sbin/haproxy'}},
}


def task_vars(name):
    with open(os.path.join(REPO_ROOT, 'roles', 'preflight', 'tasks', 'host.yml'), encoding='utf-8') as f:
        return next(t for t in yaml.safe_load(f) if t.get('name', '').startswith(name))['vars']


def render(tmp_path, facts, groups=None):
    """-> (__warnings, __refusals) of the two tasks for host h1 with FACTS (no running engine), in GROUPS."""
    all_vars = dict(task_vars(WARN_TASK), **task_vars(REFUSE_TASK))
    all_vars['__running'] = []  # no engine runs: ChangeNotRollable has nothing to compare
    play = [{'hosts': 'all', 'connection': 'local', 'gather_facts': False, 'tasks': [
        {'name': 'facts', 'ansible.builtin.set_fact': facts},
        {'name': 'write', 'ansible.builtin.copy': {
            'content': '{{ {"warnings": __warnings, "refusals": __refusals} | to_json }}',
            'dest': str(tmp_path / 'out.json'), 'mode': '0644'}, 'vars': all_vars}]}]
    (tmp_path / 'play.json').write_text(json.dumps(play))
    inv = {'all': {'hosts': {'h1': {'ansible_python_interpreter': sys.executable}},
                   'children': dict((g, {'hosts': {'h1': {}}}) for g in groups or [])}}
    (tmp_path / 'inv.json').write_text(json.dumps(inv))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_ROOT, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, 'ansible.cfg'))
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', str(tmp_path / 'inv.json'),
                        str(tmp_path / 'play.json')], capture_output=True, text=True, cwd=REPO_ROOT, env=env, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    out = json.loads((tmp_path / 'out.json').read_text())
    return out['warnings'], out['refusals']


def test_every_warning_and_refusal_keeps_its_text(tmp_path):
    warnings, refusals = render(tmp_path, FACTS)
    assert warnings == [
        'WARNING OrphanInstance: cluster c1, host h1: vllm-pd-decode-old.service stay as they are. Fix: add the host back'
        ' to the group it served, or set vllm_pd_remove_orphans: true to stop, disable and remove them (their unit, env'
        ' and guard files).',
        ['WARNING, ignored by vllm_pd_ignore_checks (the deploy goes on):', '[ReleaseMismatch] r1'],
        ['WARNING (the deploy goes on):', '[TransferTimeoutShort] w', 'Ignored by vllm_pd_ignore_checks:', '[ModelMismatch] i'],
        'WARNING ApiPortInUse (ignored by vllm_pd_ignore_checks): host h1: the check was not run',
        'WARNING NpuToolsMissing (no NPU tools): no tools',
        'WARNING HccnConfMismatch (ignored by vllm_pd_ignore_checks): conf']
    assert refusals == [
        ['cluster c1, host h1: the installed vllm-ascend release is refused; nothing was changed:', '[UnsupportedRelease] r2',
         'A finding can be ignored by its name in vllm_pd_ignore_checks.'],
        ['cluster c1, host h1: P and D do not fit together; no engine was started:', '[TpMismatch] f',
         'A finding can be ignored by its name in vllm_pd_ignore_checks.'],
        'ProxyPythonUnfit: cluster c1, host h1: proxy_python=/usr/bin/python3 cannot run the mooncake wheel proxy (python -m'
        ' mooncake.vllm_v1_proxy_server): no module fastapi. Nothing was changed. Fix: install what is missing into that'
        " interpreter (pip install fastapi httpx uvicorn, and vllm where the release's proxy imports vllm.logger), or set"
        ' proxy_python to one that has it. ProxyFrontMissing: cluster c1, host h1: proxy_front=haproxy but /usr/sbin/haproxy'
        ' is not there (or not executable), so the proxy tier cannot run. Nothing was changed. Fix: install the'
        " distribution's haproxy package on h1 (apt-get install haproxy; dnf install haproxy on openEuler; an air-gapped site"
        ' copies the package and its dependencies: roles/proxy/README.md, "HAProxy on an air-gapped host"), set'
        ' proxy_front_binary to where it is, or set proxy_front: none.',
        ['cluster c1, host h1: the NPU layer is not ready (NpuLinkDown); add a check to vllm_pd_ignore_checks only when you'
         ' accept it:', 'down 1', 'down 2']]


def test_a_host_with_nothing_to_say_shows_and_refuses_nothing(tmp_path):
    quiet = dict(FACTS, __preflight_orphans=[], __preflight_release=[], __preflight_fit=[], __preflight_npu_mine=[],
                 __preflight_ignore=[], __engine_host_read={'proxy_python': {'problems': []}, 'proxy_front': {'found': True}})
    assert render(tmp_path, quiet) == ([], [])


def test_proxy_members_no_inventory_host_explains_are_named(tmp_path):
    live = {'skipped': False, 'status': 200, 'json': {'current_prefill_instances': ['10.0.0.1:8100', '10.9.9.9:8100'],
                                                      'current_decode_instances': ['10.9.9.8:8200']}}
    facts = dict(FACTS, __preflight_orphans=[], __preflight_release=[], __preflight_fit=[], __preflight_npu_mine=[],
                 __preflight_ignore=[], __preflight_proxy_live=live, vllm_pd_address={'address': '10.0.0.1'})
    warnings = render(tmp_path, facts, groups=['vllm_pd_prefill', 'vllm_pd_proxy', 'cluster_c1'])[0]
    assert warnings == [
        "WARNING OrphanInstance: cluster c1, the proxy on h1 lists P ['10.9.9.9:8100'] D ['10.9.9.8:8200'], at no address"
        ' of an inventory host of the cluster (a host deleted from the inventory, an instance added by hand); the run'
        ' cannot visit them. They stay in the proxy. Fix: add the host back to its cluster group and role group, or set'
        ' vllm_pd_remove_orphans: true to remove them from the proxy (stop their engines on their hosts yourself).']
