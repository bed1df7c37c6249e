# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""doctor_cluster: the doctor's engines of a host, the peers it pings and the prefill addresses a decode host
probes, from plain dicts in the shape of hostvars (what roles/doctor/vars/main.yml computed in Jinja)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_cluster import (
    UNINSPECTED, cluster_members, diagnose_hosts, doctor_engines, doctor_peers, doctor_targets)

GROUPS = {'vllm_pd_prefill': ['p1', 'p2', 'pd3', 'px'], 'vllm_pd_decode': ['d1', 'd2', 'pd3', 'dx', 'dgone'],
          'vllm_pd_proxy': ['p1']}
PLAY = ['p1', 'p2', 'pd3', 'd1', 'd2', 'px', 'dx', 'dgone', 'other']


def addr(a):
    return {'address': a, 'interface': 'eth0'}


def inspect(*engines):
    return {'engines': list(engines)}


def hostvars(**extra):
    out = {'p1': {'vllm_pd_cluster': 'a', 'vllm_pd_address': addr('10.0.0.1')},
           'p2': {'vllm_pd_cluster': 'a'},  # no address: no peer, still probed when inspected
           'pd3': {'vllm_pd_cluster': 'b', 'vllm_pd_address': addr('10.0.1.3')},  # P and D on one host
           'd1': {'vllm_pd_cluster': 'a', 'vllm_pd_address': addr('10.0.0.11')},
           'd2': {'vllm_pd_cluster': 'a', 'vllm_pd_address': addr('10.0.0.12')},
           'px': {'vllm_pd_cluster': 'b', 'vllm_pd_address': addr('10.0.1.1')},
           'dx': {'vllm_pd_cluster': 'b', 'vllm_pd_address': addr('10.0.1.11')},
           'dgone': {'vllm_pd_cluster': 'a', 'vllm_pd_state': 'absent', 'vllm_pd_address': addr('10.0.0.19')},
           'other': {}}
    for host, variables in extra.items():
        out[host].update(variables)
    return out


def test_members_are_the_play_hosts_of_the_cluster_in_play_order_without_the_retiring():
    assert cluster_members(hostvars(), GROUPS, 'd1', PLAY) == (['p1', 'p2', 'd1', 'd2'], ['p1', 'p2'], ['d1', 'd2'])
    assert cluster_members(hostvars(), GROUPS, 'd1', ['d2', 'p2', 'd1']) == (['d2', 'p2', 'd1'], ['p2'], ['d2', 'd1'])


def test_a_host_without_a_cluster_joins_only_hosts_whose_cluster_is_empty():
    assert cluster_members(hostvars(), GROUPS, 'other', PLAY) == ([], [], [])
    hv = hostvars(d2={'vllm_pd_cluster': ''})
    assert cluster_members(hv, GROUPS, 'other', PLAY) == (['d2'], [], ['d2'])


def test_the_cluster_is_compared_as_it_is():
    assert cluster_members(hostvars(p2={'vllm_pd_cluster': 1}), GROUPS, 'p2', PLAY)[0] == ['p2']


def test_peers_are_the_other_side_with_an_address():
    hv = hostvars()
    assert doctor_peers(hv, GROUPS, 'p1', PLAY) == [
        {'host': 'd1', 'address': '10.0.0.11'}, {'host': 'd2', 'address': '10.0.0.12'}]
    assert doctor_peers(hv, GROUPS, 'd1', PLAY) == [{'host': 'p1', 'address': '10.0.0.1'}]  # p2 has no address
    assert doctor_peers(hv, GROUPS, 'other', PLAY) == []


def test_a_host_in_both_groups_pings_both_sides_but_not_itself():
    assert doctor_peers(hostvars(), GROUPS, 'pd3', PLAY) == [
        {'host': 'dx', 'address': '10.0.1.11'}, {'host': 'px', 'address': '10.0.1.1'}]


def test_a_retiring_host_and_a_host_outside_the_play_are_no_peers():
    assert [p['host'] for p in doctor_peers(hostvars(), GROUPS, 'p1', ['p1', 'd2'])] == ['d2']
    assert [p['host'] for p in doctor_peers(hostvars(), GROUPS, 'p1', PLAY)] == ['d1', 'd2']


ENGINE = {'kind': 'prefill', 'advertised': {'address': '10.0.0.1'}, 'group': {'ports': [30000, 30001]}}


def test_targets_are_the_inspected_prefill_engines_with_a_group():
    no_group = {'kind': 'prefill', 'advertised': {'address': 'x'}}
    hv = hostvars(p1={'__doctor_inspect': inspect(ENGINE, dict(ENGINE, kind='decode'), no_group)},
                  p2={'__doctor_inspect': inspect(dict(ENGINE, advertised={'address': '10.0.0.2'}, group={'ports': [1]}))},
                  d1={'__doctor_inspect': inspect(ENGINE)})
    assert doctor_targets(hv, GROUPS, 'd1', PLAY) == [
        {'host': 'p1', 'address': '10.0.0.1', 'ports': [30000, 30001], 'what': 'advertised'},
        {'host': 'p2', 'address': '10.0.0.2', 'ports': [1], 'what': 'advertised'}]
    assert doctor_targets(hv, GROUPS, 'dx', PLAY) == []


def test_no_targets_before_the_inspect_step_or_when_it_was_skipped():
    assert doctor_targets(hostvars(), GROUPS, 'd1', PLAY) == []
    assert doctor_targets(hostvars(p1={'__doctor_inspect': {'skipped': True}}), GROUPS, 'd1', PLAY) == []


PREFILL = {'unit': 'vllm-pd-prefill.service', 'env_file': '/etc/p.env', 'api_port': 8100, 'container': '',
           'container_engine': 'podman', 'kv_port': '30000', 'tp': 2, 'port_rank_start': 0, 'dp_size_local': 1,
           'devices': [0, 1]}
DECODE = {'unit': 'vllm-pd-decode.service', 'env_file': '/etc/d.env', 'api_port': 8200, 'container': 'c',
          'container_engine': 'docker', 'kv_port': 31000, 'tp': 1}


def test_engines_prefill_first_with_the_group_layout():
    assert doctor_engines({'decode': [DECODE], 'prefill': [PREFILL]}) == [
        {'kind': 'prefill', 'unit': 'vllm-pd-prefill.service', 'env_file': '/etc/p.env', 'api_port': 8100,
         'container': '', 'container_engine': 'podman', 'kv_port': 30000, 'tp_size': 2, 'pp_size': 1, 'pcp_size': 1,
         'dp_rank_start': 0, 'dp_size': 1},
        {'kind': 'decode', 'unit': 'vllm-pd-decode.service', 'env_file': '/etc/d.env', 'api_port': 8200,
         'container': 'c', 'container_engine': 'docker'}]


def test_engine_sizes_are_read_as_jinja_int_reads_them():
    (e,) = doctor_engines({'prefill': [dict(PREFILL, tp='4', pp='2.0', pcp=None)], 'decode': []})
    assert (e['tp_size'], e['pp_size'], e['pcp_size']) == (4, 2, 0)
    assert doctor_engines({'prefill': [], 'decode': []}) == []


def test_diagnose_hosts_every_play_host_but_the_retiring_with_its_entry_or_why_not():
    hv = {'p1': {'group_names': ['cluster_a', 'vllm_pd_prefill', 'vllm_pd_proxy'], 'vllm_pd_cluster': 'a',
                 '__doctor_entry': {'cluster': 'a', 'groups': ['prefill', 'proxy'], 'inspect': {}},
                 '__proxy_inspect_members': {'prefill': []}},
          'd1': {'group_names': ['vllm_pd_decode', 'prefill'], 'vllm_pd_cluster': 'a'},
          'd9': {'group_names': ['vllm_pd_decode'], 'vllm_pd_state': 'absent', '__doctor_entry': {}},
          'x': {'group_names': []}}
    out = diagnose_hosts(hv, ['d1', 'p1', 'd9', 'x'])
    assert list(out) == ['d1', 'p1', 'x']
    assert out['p1'] == {'cluster': 'a', 'groups': ['prefill', 'proxy'], 'inspect': {}, 'proxy_members': {'prefill': []}}
    assert out['d1'] == {'cluster': 'a', 'groups': ['prefill', 'decode'], 'unreachable': UNINSPECTED, 'proxy_members': None}
    assert out['x'] == {'cluster': '', 'groups': [], 'unreachable': UNINSPECTED, 'proxy_members': None}
    assert 'proxy_members' not in hv['p1']['__doctor_entry']  # the host's entry is not changed
