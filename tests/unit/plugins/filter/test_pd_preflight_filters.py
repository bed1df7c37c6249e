# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters the preflight's Jinja programs became (issue 36): pd_reach_targets,
pd_planned_engines, pd_release_engines, pd_restarting_roles, pd_api_port_checks; plain dicts as hostvars."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_api_port_checks import FilterModule as ApiPorts
from ansible_collections.vllm_pd.ascend.plugins.filter.pd_planned_engines import FilterModule as Planned
from ansible_collections.vllm_pd.ascend.plugins.filter.pd_reach_targets import FilterModule as Reach
from ansible_collections.vllm_pd.ascend.plugins.filter.pd_release_engines import FilterModule as Release
from ansible_collections.vllm_pd.ascend.plugins.filter.pd_restarting_roles import FilterModule as Restarting

GROUPS = {'vllm_pd_prefill': ['p1'], 'vllm_pd_decode': ['d1']}
INSTANCES = {'prefill': [{'name': 'p0', 'unit': 'vllm-pd-prefill-0.service', 'api_port': 9000, 'kv_port': 30000,
                          'tp': 1, 'port_rank_start': 0, 'dp_size_local': 1, 'dp_size': 1, 'pp': 1, 'pcp': 1}],
             'decode': []}
HOSTVARS = {'p1': {'vllm_pd_cluster': 'c', 'vllm_pd_instances': INSTANCES, 'vllm_pd_address': {'address': '10.0.0.1'},
                   'vllm_pd_prefill_tp_size': 1, 'vllm_pd_release': {'prefill': {'vllm_ascend': 'v1'}}},
            'd1': {'vllm_pd_cluster': 'c', 'vllm_pd_address': {'address': '10.0.0.2'}, 'vllm_pd_decode_tp_size': 1,
                   'vllm_pd_instances': {'prefill': [], 'decode': [{'api_port': 9100, 'dp_size': 1, 'pp': 1, 'pcp': 1}]}}}


def one(module, name):
    filters = module().filters()
    assert list(filters) == [name]
    return filters[name]


def test_pd_reach_targets():
    assert one(Reach, 'pd_reach_targets')(HOSTVARS, GROUPS, 'd1') == [
        {'host': 'p1', 'role': 'prefill', 'address': '10.0.0.1', 'interface': '', 'port': 30000,
         'var': 'vllm_pd_host_ip'}]


def test_pd_planned_engines_and_its_errors():
    planned = one(Planned, 'pd_planned_engines')
    assert [(e['host'], e['kind'], e['dp']) for e in planned(HOSTVARS, GROUPS, 'c')] == [('p1', 'prefill', 1), ('d1', 'decode', 1)]
    bad = dict(HOSTVARS, p1=dict(HOSTVARS['p1'], vllm_pd_engine_env='A=1'))
    with pytest.raises(AnsibleFilterError, match='pd_redact_env: the environment must be a mapping, not a str'):
        planned(bad, GROUPS, 'c')
    bad = dict(HOSTVARS, p1=dict(HOSTVARS['p1'], vllm_pd_block_size='many'))
    with pytest.raises(AnsibleFilterError, match='host p1 prefill'):
        planned(bad, GROUPS, 'c')


def test_pd_release_engines():
    assert one(Release, 'pd_release_engines')(HOSTVARS, GROUPS, 'c') == [{'vllm_ascend': 'v1', 'host': 'p1', 'kind': 'prefill'}]


def test_pd_restarting_roles():
    hosts = [{'vllm_pd_changing_units': ['vllm-pd-prefill-0.service'], '__preflight_active': ['vllm-pd-prefill-0.service']}]
    assert one(Restarting, 'pd_restarting_roles')(hosts) == ['prefill']
    assert one(Restarting, 'pd_restarting_roles')(None) == []


def test_pd_api_port_checks():
    checks = one(ApiPorts, 'pd_api_port_checks')
    assert checks(INSTANCES, []) == [{'what': 'p0 API', 'port': 9000, 'var': 'prefill_api_port'}]
    assert checks(INSTANCES, ['vllm-pd-prefill-0.service']) == []


def test_the_preflight_checks_the_exporter_port_the_inventory_check_reads():
    from ansible_collections.vllm_pd.ascend.plugins.filter.pd_front_metrics_port import pd_front_metrics_port
    assert pd_front_metrics_port({'vllm_pd_proxy_front': 'haproxy'}) == 8405
    assert pd_front_metrics_port({'vllm_pd_proxy_front': 'haproxy', 'proxy_front_metrics_port': '9100'}) == 9100
    assert pd_front_metrics_port({'vllm_pd_proxy_front_metrics_port': 9100}) == 0         # no tier
    assert pd_front_metrics_port({'vllm_pd_proxy_front': 'haproxy', 'vllm_pd_proxy_front_metrics_port': 'x'}) == 0
