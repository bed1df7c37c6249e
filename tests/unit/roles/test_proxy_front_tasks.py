# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The proxy tier recycles a process whose files changed (roles/proxy/tasks/front_process.yml): drained in HAProxy
before its restart (pd_unit, which then waits for its health route), set ready in HAProxy after; both only when it restarts, so a converged
run runs no pd_front_server. Removing or unguarding the drain cuts requests in flight (tests/lab/test_proxy_front.py
shows it under load); these tests catch it without a lab (tests/contract/breaks.yml)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
TASKS = os.path.join(ROOT, 'roles', 'proxy', 'tasks')
MODULE = 'vllm_pd.ascend.pd_front_server'
RESTART = '__proxy_process_restart'


def tasks(name):
    with open(os.path.join(TASKS, name), encoding='utf-8') as f:
        return yaml.safe_load(f)


def index(steps, pred, what):
    found = [k for k, t in enumerate(steps) if pred(t)]
    assert len(found) == 1, 'front_process.yml: expected one task that %s, found %d' % (what, len(found))
    return found[0]


def test_a_restarting_process_is_drained_first_and_set_ready_last_in_haproxy():
    steps = tasks('front_process.yml')
    drain = index(steps, lambda t: t.get(MODULE, {}).get('state') == 'drain', 'drains the process')
    # one pd_unit run starts or restarts it and waits for its health route
    start = index(steps, lambda t: 'vllm_pd.ascend.pd_unit' in t, 'starts or restarts the process, then waits for it')
    unit = steps[start]['vllm_pd.ascend.pd_unit']
    assert unit['name'] == '{{ __proxy_process.unit }}' and unit['ready']['url'].startswith('http://127.0.0.1:')
    ready = index(steps, lambda t: t.get(MODULE, {}).get('state') == 'ready', 'sets it ready')
    assert drain < start < ready
    # the same decision drains, restarts and readies: never a restart without a drain, nor a drain without a restart
    assert unit['restart'] == '{{ %s }}' % RESTART
    for k in (drain, ready):
        assert steps[k]['when'] == RESTART, steps[k]
        assert steps[k][MODULE]['server'] == '{{ __proxy_process.server }}'
    assert steps[drain][MODULE]['timeout'] == '{{ proxy_front_drain_timeout | int }}'


def test_the_restart_decision_is_made_once_per_process_from_its_changed_files():
    (loop,) = [t for t in tasks('front.yml') if t.get('ansible.builtin.include_tasks') == 'front_process.yml']
    decision = loop['vars'][RESTART]
    for path in ('__proxy_process_unit_path', '__proxy_env_path', '__proxy_process.env_file', '__proxy_tier_changed'):
        assert path in decision, decision
