# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""cluster_engines: the engines of one cluster the preflight compares (planned, their releases, the roles a change
restarts), from plain dicts as hostvars."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.membership import as_int, cluster_hosts
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model.cluster_engines import (
    planned_engines, release_engines, restarting_roles)

GROUPS = {'vllm_pd_prefill': ['p1', 'p2', 'x1'], 'vllm_pd_decode': ['d1', 'p2']}


def hostvars():
    inst = {'dp_size': 2, 'pp': '1', 'pcp': 1}
    return {
        'p1': {'vllm_pd_cluster': 7, 'vllm_pd_prefill_tp_size': '4', 'vllm_pd_instances': {'prefill': [inst], 'decode': []},
               'vllm_pd_address': {'address': '10.0.0.1'}, 'vllm_pd_model': '/m', 'vllm_pd_block_size': 128,
               'prefill_env': {'A': '1', 'HF_TOKEN': 's', 'MINE': 'x'}, 'vllm_pd_secret_env_names': ['MINE', 3],
               'prefill_extra_args': ['--block-size=64'], 'vllm_pd_release': {'prefill': {'vllm_ascend': 'v1'}}},
        'p2': {'vllm_pd_cluster': '7', 'vllm_pd_prefill_tp_size': 2, 'vllm_pd_decode_tp_size': 'x',
               'vllm_pd_engine_env': {'B': '2'}, 'decode_model': '/d', 'vllm_pd_state': 'absent',
               'vllm_pd_release': {'prefill': {'vllm_ascend': 'v1'}, 'decode': {'vllm_ascend': 'v2'}}},
        'd1': {'vllm_pd_cluster': '7', 'vllm_pd_decode_tp_size': 8, 'vllm_pd_instances': {'decode': []},
               'vllm_pd_release': {'decode': {'vllm_ascend': 'v1', 'host': 'old'}}},
        'x1': {'vllm_pd_cluster': 'other'},
    }


def test_cluster_hosts_compare_the_cluster_as_text():
    assert cluster_hosts(GROUPS, hostvars(), '7', 'prefill') == ['p1', 'p2']
    assert cluster_hosts(GROUPS, hostvars(), 7, 'decode') == ['d1', 'p2']
    assert cluster_hosts({}, hostvars(), 7, 'decode') == []


def test_as_int_is_jinjas_int():
    assert [as_int(v) for v in (3, '3', '3.7', 2.9, 'x', None)] == [3, 3, 3, 2, 0, 0]


def test_planned_engines_prefill_first_with_defaults():
    engines = planned_engines(GROUPS, hostvars(), '7')
    assert [(e['host'], e['kind']) for e in engines] == [('p1', 'prefill'), ('p2', 'prefill'), ('d1', 'decode'),
                                                         ('p2', 'decode')]
    p1 = engines[0]
    assert (p1['tp'], p1['dp'], p1['pp'], p1['pcp']) == (4, 2, 1, 1)
    assert p1['model_path'] == '/m' and p1['address'] == '10.0.0.1' and p1['model'] == {}
    assert not p1['model_read']  # no host of this run read it (outside --limit)
    hv = hostvars()
    hv['p1']['vllm_pd_model_facts'] = {}  # read, no config.json
    assert planned_engines(GROUPS, hv, '7')[0]['model_read']
    assert p1['env'] == {'A': '1', 'HF_TOKEN': '<hidden>', 'MINE': '<hidden>'}
    assert p1['settings']['block_size'] == 64 and p1['kv_connector_extra'] == {}
    p2d = engines[3]
    assert (p2d['tp'], p2d['dp'], p2d['model_path'], p2d['address'], p2d['env']) == (0, None, '/d', '', {'B': '2'})
    assert engines[2]['dp'] is None  # no decode instance planned


def test_planned_engines_refuse_a_bad_setting_and_an_env_that_is_no_mapping():
    hv = hostvars()
    hv['p1']['prefill_extra_args'] = ['--block-size=many']
    with pytest.raises(ValueError, match='host p1 prefill'):
        planned_engines(GROUPS, hv, '7')
    hv = hostvars()
    hv['p1']['prefill_env'] = ['A=1']
    with pytest.raises(TypeError, match='not a list'):
        planned_engines(GROUPS, hv, '7')


def test_release_engines_leave_out_absent_and_unread_hosts():
    assert release_engines(GROUPS, hostvars(), 7) == [
        {'vllm_ascend': 'v1', 'host': 'p1', 'kind': 'prefill'}, {'vllm_ascend': 'v1', 'host': 'd1', 'kind': 'decode'}]


def test_restarting_roles_only_units_that_run_once_each():
    hosts = [{'vllm_pd_changing_units': ['vllm-pd-decode-0.service', 'vllm-pd-prefill-0.service'],
              '__preflight_active': ['vllm-pd-decode-0.service']},
             {'vllm_pd_changing_units': ['vllm-pd-decode-1.service', 'vllm-pd-prefill-1.service'],
              '__preflight_active': ['vllm-pd-decode-1.service', 'vllm-pd-prefill-1.service']},
             {'__preflight_active': ['vllm-pd-prefill-2.service']}, {}]
    assert restarting_roles(hosts) == ['decode', 'prefill']
    assert restarting_roles(hosts[2:]) == []
