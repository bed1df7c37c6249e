# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""reach_targets: the peers a host dials to prove its routes, from plain dicts as hostvars."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.reach_targets import reach_targets
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import instance_ports

GROUPS = {'vllm_pd_prefill': ['p1', 'p2', 'px', 'pl'], 'vllm_pd_decode': ['d1', 'p2', 'd2']}
P_INST = {'kv_port': 30000, 'tp': 2, 'pp': 2, 'port_rank_start': 1, 'dp_size_local': 1, 'api_port': 9000}


def hostvars():
    none = {'prefill': [], 'decode': []}
    return {
        'p1': {'vllm_pd_cluster': 'a', 'vllm_pd_instances': dict(none, prefill=[P_INST]),
               'vllm_pd_address': {'address': '10.0.0.1', 'interface': 'eth1', 'source': 'roce_ip'}},
        # P and D on one host
        'p2': {'vllm_pd_cluster': 'a', 'vllm_pd_instances': {'prefill': [P_INST], 'decode': [{'api_port': '9100'}]},
               'vllm_pd_address': {'address': '10.0.0.2'}},
        'px': {'vllm_pd_cluster': 'b', 'vllm_pd_instances': dict(none, prefill=[P_INST]),
               'vllm_pd_address': {'address': '10.0.0.9'}},
        'pl': {'vllm_pd_cluster': 'a'},  # not resolved in this run (--limit)
        'd1': {'vllm_pd_cluster': 'a', 'vllm_pd_instances': dict(none, decode=[{'api_port': 9200}, {'api_port': 9201}]),
               'vllm_pd_address': {'address': '10.0.0.3', 'interface': 'eth2'}},
        'd2': {'vllm_pd_cluster': 'a', 'vllm_pd_instances': none, 'vllm_pd_address': {'address': '10.0.0.4'}},
    }


def test_a_decode_host_dials_the_first_group_port_of_each_prefill_host():
    first = instance_ports(P_INST)[0]
    assert first == 30004
    assert reach_targets(GROUPS, hostvars(), 'd1') == [
        {'host': 'p1', 'role': 'prefill', 'address': '10.0.0.1', 'interface': 'eth1', 'port': first,
         'var': 'vllm_pd_roce_ip'},
        {'host': 'p2', 'role': 'prefill', 'address': '10.0.0.2', 'interface': '', 'port': first,
         'var': 'vllm_pd_host_ip'}]


def test_a_prefill_host_dials_the_first_api_port_of_each_decode_host():
    assert reach_targets(GROUPS, hostvars(), 'p1') == [
        {'host': 'd1', 'role': 'decode', 'address': '10.0.0.3', 'interface': 'eth2', 'port': 9200,
         'var': 'vllm_pd_host_ip'},
        {'host': 'p2', 'role': 'decode', 'address': '10.0.0.2', 'interface': '', 'port': 9100,
         'var': 'vllm_pd_host_ip'}]


def test_a_host_with_both_sides_dials_each_peer_once_never_itself():
    targets = reach_targets(GROUPS, hostvars(), 'p2')
    assert [(t['host'], t['role']) for t in targets] == [('p1', 'prefill'), ('d1', 'decode')]


def test_no_instances_no_targets_and_other_clusters_are_left_out():
    assert reach_targets(GROUPS, hostvars(), 'd2') == []
    assert reach_targets(GROUPS, hostvars(), 'px') == []
