# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ChangeNotRollable from the roles' own templates: the command line the engine role writes (roles/engine/vars,
__engine_command) read back as a running engine (parse_launch), against the engines list the preflight plans
(roles/preflight/tasks/host.yml, the fit task's __engines, evaluated as it is written). Rendered by
ansible-playbook on the controller; nothing runs."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys

import yaml

from ansible_collections.vllm_pd.ascend.plugins.filter import pd_instances
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_launch
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import rollable

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
COLLECTIONS_ROOT = next(p for p in sys.path if os.path.isdir(os.path.join(p, 'ansible_collections', 'vllm_pd', 'ascend')))
FIT_TASK = 'Check that P and D of this cluster fit together, and the release and the NPU layer of its hosts'
COMMON = dict(vllm_pd_model='/data/models/m', vllm_pd_kv_port=30000, vllm_pd_prefill_tp_size=2,
              vllm_pd_decode_tp_size=2, vllm_pd_cluster='c1')
ADDRESS = {'p1': '10.0.30.10', 'd1': '10.0.30.20'}


def planned_template():
    """The preflight's planned engines, the Jinja of host.yml as it is."""
    tasks = yaml.safe_load(open(os.path.join(REPO_ROOT, 'roles', 'preflight', 'tasks', 'host.yml')))
    return next(t for t in tasks if t.get('name') == FIT_TASK)['vars']['__engines']


def engine_vars(host, kind, hv):
    """What roles/prefill|decode pass the engine role for the host's first instance."""
    inst = hv['vllm_pd_instances'][kind][0]
    return dict(engine_kind=kind, engine_name=inst['name'], engine_cluster='c1', engine_address={'address': ADDRESS[host]},
                engine_kv_role='kv_producer' if kind == 'prefill' else 'kv_consumer', engine_kv_port=inst['kv_port'],
                engine_model=hv['vllm_pd_model'], engine_api_port=inst['api_port'], engine_tp_size=inst['tp'],
                engine_dp_size=inst['dp_size'], engine_dp_args=inst['dp_args'], engine_dp_rpc_port=12342,
                engine_parallel_args=inst['parallel_args'], engine_extra_args=hv.get(kind + '_extra_args', []),
                engine_vllm_binary='vllm')


def render(tmp_path, hostvars):
    """-> ({host: the engine's argv}, the preflight's planned engines) for HOSTVARS (p* prefill, d* decode)."""
    for h, hv in hostvars.items():
        kind = 'prefill' if h.startswith('p') else 'decode'
        hv['vllm_pd_instances'] = {'prefill': [], 'decode': []}
        hv['vllm_pd_instances'][kind] = pd_instances.pd_instances(
            kind, hv['vllm_pd_%s_tp_size' % kind], pp_size=hv.get('vllm_pd_%s_pp_size' % kind),
            pcp_size=hv.get('vllm_pd_%s_pcp_size' % kind), extra_args=hv.get(kind + '_extra_args'),
            kv_port=hv['vllm_pd_kv_port'], api_port=8100, hostname=h)
        hv['__render_engine'] = engine_vars(h, kind, hv)
        hv['ansible_python_interpreter'] = sys.executable
    inv = dict(all=dict(hosts=hostvars, children=dict(
        vllm_pd_prefill=dict(hosts=dict((h, {}) for h in hostvars if h.startswith('p'))),
        vllm_pd_decode=dict(hosts=dict((h, {}) for h in hostvars if h.startswith('d'))))))
    facts = dict((k, '{{ __render_engine.%s }}' % k) for k in hostvars['p1']['__render_engine'])
    play = [{'hosts': 'all', 'connection': 'local', 'gather_facts': False, 'tasks': [
        {'name': 'engine vars', 'ansible.builtin.set_fact': facts},
        {'name': 'engine role vars', 'ansible.builtin.include_vars': {'file': os.path.join(REPO_ROOT, 'roles/engine/vars/main.yml')}},
        {'name': 'write', 'ansible.builtin.copy': {
            'content': '{{ {"argv": __engine_command, "planned": __engines} | to_json }}',
            'dest': str(tmp_path) + '/{{ inventory_hostname }}.json', 'mode': '0644'},
         'vars': {'__engines': planned_template()}}]}]
    (tmp_path / 'inv.json').write_text(json.dumps(inv))
    (tmp_path / 'play.json').write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_ROOT, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, 'ansible.cfg'))
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', str(tmp_path / 'inv.json'),
                        str(tmp_path / 'play.json')], capture_output=True, text=True, cwd=REPO_ROOT, env=env, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    out = dict((h, json.loads((tmp_path / ('%s.json' % h)).read_text())) for h in hostvars)
    return dict((h, o['argv']) for h, o in out.items()), out['p1']['planned']


def running(argvs):
    return [dict(doctor_launch.parse_launch(argv, {}), host=h, kind='prefill' if h.startswith('p') else 'decode', unit='u')
            for h, argv in argvs.items()]


def cluster(**p):
    return {'p1': dict(COMMON, **p), 'd1': dict(COMMON)}


def test_pp_and_pcp_of_p_reach_the_comparison_from_the_plan_and_from_the_running_command(tmp_path):
    # running: P's pipeline size from its extra args; planned now: the same size from the variable (no change)
    argvs = render(tmp_path, cluster(prefill_extra_args=['--pipeline-parallel-size', '2']))[0]
    run = running(argvs)
    assert [r['pp'] for r in run] == [2, 1] and run[1]['kv_extra']['prefill']['pp_size'] == 2
    same, planned = render(tmp_path, cluster(vllm_pd_prefill_pp_size=2))
    assert [(p['kind'], p['pp'], p['pcp']) for p in planned] == [('prefill', 2, 1), ('decode', 1, 1)]
    assert same['d1'] == argvs['d1'] and rollable.findings(run, planned) == []
    # planned now: pp 1 and pcp 2, a change P and D share
    planned = render(tmp_path, cluster(vllm_pd_prefill_pcp_size=2,
                                       vllm_pd_kv_connector_extra={'prefill': {'pp_layer_partition': '1'}}))[1]
    [f] = rollable.findings(run, planned)
    assert f['attributes'] == ['pp size', 'pcp size', 'kv_connector_extra_config.prefill.pp_layer_partition']
    assert 'pp size on prefill: 2 -> 1; pcp size on prefill: 1 -> 2' in f['message']
    assert rollable.findings(run, planned, allow_downtime=True) == []
