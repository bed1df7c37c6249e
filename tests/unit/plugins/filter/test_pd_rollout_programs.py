# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters that replaced Jinja programs of the rollout (issue 36): pd_engine_hosts (rollout membership),
pd_prefill_groups (the prefill port groups a decode host probes) and pd_npu_clusters_findings (TLS/version
comparison per cluster), with plain dicts as hostvars."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_engine_hosts import pd_engine_hosts
from ansible_collections.vllm_pd.ascend.plugins.filter.pd_npu_clusters_findings import pd_npu_clusters_findings
from ansible_collections.vllm_pd.ascend.plugins.filter.pd_prefill_groups import pd_prefill_groups

GROUPS = {'vllm_pd_prefill': ['p1', 'p2', 'pd3'], 'vllm_pd_decode': ['d1', 'd2', 'pd3'], 'vllm_pd_proxy': ['p1']}


def instance(unit, kv_port, **extra):
    out = {'unit': unit, 'kv_port': kv_port, 'tp': 2, 'port_rank_start': 0, 'dp_size_local': 1}
    out.update(extra)
    return out


def hostvars():
    return {
        'p1': {'vllm_pd_cluster': 'a', 'vllm_pd_address': {'address': '10.0.0.1'},
               'vllm_pd_instances': {'prefill': [instance('vllm-pd-prefill', 28000)], 'decode': []}},
        'p2': {'vllm_pd_cluster': 'a', 'vllm_pd_state': 'absent'},
        'pd3': {'vllm_pd_cluster': 7, 'vllm_pd_address': {'address': '10.0.0.3'},
                'vllm_pd_instances': {'prefill': [instance('vllm-pd-prefill-dp0', 28000, pp=2, pcp=None),
                                                  instance('vllm-pd-prefill-dp1', 28000, port_rank_start=1)]}},
        'd1': {'vllm_pd_cluster': 'a'},
        'd2': {'vllm_pd_cluster': '7', 'vllm_pd_state': 'present'},
    }


def test_engine_hosts_prefill_then_decode_in_the_run_order_without_retiring_hosts():
    assert pd_engine_hosts(hostvars(), GROUPS, ['d2', 'pd3', 'p2', 'p1', 'd1']) == [
        {'host': 'pd3', 'cluster': '7', 'role': 'prefill'}, {'host': 'p1', 'cluster': 'a', 'role': 'prefill'},
        {'host': 'd2', 'cluster': '7', 'role': 'decode'}, {'host': 'pd3', 'cluster': '7', 'role': 'decode'},
        {'host': 'd1', 'cluster': 'a', 'role': 'decode'}]


def test_engine_hosts_only_the_targeted_hosts_and_missing_groups():
    assert pd_engine_hosts(hostvars(), GROUPS, ['d1']) == [{'host': 'd1', 'cluster': 'a', 'role': 'decode'}]
    assert pd_engine_hosts(hostvars(), {}, ['p1', 'd1']) == []
    with pytest.raises(KeyError):  # the Jinja failed on an undefined cluster too
        pd_engine_hosts({'p1': {}}, GROUPS, ['p1'])


def test_prefill_groups_of_the_cluster_each_instance_with_defaults():
    assert pd_prefill_groups(hostvars(), GROUPS, '7') == [
        {'host': 'pd3', 'unit': 'vllm-pd-prefill-dp0', 'address': '10.0.0.3', 'kv_port': 28000, 'tp_size': 2,
         'pp_size': 2, 'pcp_size': None, 'dp_rank_start': 0, 'dp_size_local': 1},
        {'host': 'pd3', 'unit': 'vllm-pd-prefill-dp1', 'address': '10.0.0.3', 'kv_port': 28000, 'tp_size': 2,
         'pp_size': 1, 'pcp_size': 1, 'dp_rank_start': 1, 'dp_size_local': 1}]
    # p2 is retiring (and has no plan): left out
    assert [g['host'] for g in pd_prefill_groups(hostvars(), GROUPS, 'a')] == ['p1']
    assert pd_prefill_groups(hostvars(), GROUPS, 'b') == []


def test_prefill_groups_name_a_prefill_host_this_run_did_not_plan():
    hv = hostvars()
    del hv['p1']['vllm_pd_instances']  # outside --limit: no plan of its own in this run
    with pytest.raises(AnsibleFilterError, match=r'cluster a: the decode side needs the port groups of prefill host p1, '
                                                 r'which this run did not plan .*--limit cluster_a'):
        pd_prefill_groups(hv, GROUPS, 'a')


def report(tls, driver='24.1', cann='8.1', **extra):
    out = {'tls': tls, 'driver_version': driver, 'cann_version': cann, 'tools_missing': False}
    out.update(extra)
    return out


def test_npu_clusters_findings_per_cluster_of_the_hosts_that_read_tls():
    hv = {'a1': {'vllm_pd_cluster': 'a', 'npu': report({0: 1})},
          'a2': {'vllm_pd_cluster': 'a', 'npu': report({0: 1})},
          'a3': {'vllm_pd_cluster': 'a', 'npu': report({0: 0}, driver='23.0')},
          'a4': {'vllm_pd_cluster': 'a', 'npu': report({0: 0}, tools_missing=True)},  # no tools: not compared
          'a5': {'vllm_pd_cluster': 'a', 'npu': {'skipped': True}},  # no NPU of its own: not compared
          'a6': {'vllm_pd_cluster': 'a'},
          'b1': {'vllm_pd_cluster': 'b', 'npu': report({0: 1})},
          'b2': {'vllm_pd_cluster': 'b', 'npu': report({0: 0})},
          'x': {}}
    hosts = sorted(hv)
    found = pd_npu_clusters_findings(hv, ['a', 'b'], hosts, 'npu')
    assert [(f['check'], f['host']) for f in found] == [
        ('TlsMismatch', 'a3'), ('VersionMismatch', 'a3'), ('TlsMismatch', 'b1'), ('TlsMismatch', 'b2')]
    assert pd_npu_clusters_findings(hv, ['b'], ['b1'], 'npu') == []  # b2 did not report in this play
    assert pd_npu_clusters_findings(hv, [], hosts, 'npu') == []
