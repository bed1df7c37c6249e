# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pd_npu_peers: the decode NPUs a prefill host pings, from the D hosts of its cluster (the preflight reads hccn.conf
as text, the doctor slurps it)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import base64

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_npu_peers import pd_npu_peers

GROUPS = {'vllm_pd_prefill': ['p1', 'p2'], 'vllm_pd_decode': ['d1', 'd2', 'p2']}
HCCN = 'address_0=29.1.0.10\nnetmask_0=255.255.255.0\naddress_1=29.1.0.11\naddress_3=29.1.0.13\n'


def hostvars(hccn=HCCN, **extra):
    decode = {'vllm_pd_instances': {'decode': [{'devices': [0, 1]}, {'devices': ['2', '3']}]}}
    out = {'p1': {'vllm_pd_cluster': 'a'},
           'p2': dict(decode, vllm_pd_cluster='b', hccn=hccn),  # P and D on one host, another cluster
           'd1': dict(decode, vllm_pd_cluster='a', hccn=hccn),
           'd2': dict(decode, vllm_pd_cluster='b', hccn=hccn)}
    for host, variables in extra.items():
        out[host].update(variables)
    return out


def test_every_decode_npu_of_the_cluster_with_an_address():
    assert pd_npu_peers(hostvars(), GROUPS, 'p1', 'hccn') == [
        {'host': 'd1', 'npu': 0, 'address': '29.1.0.10'}, {'host': 'd1', 'npu': 1, 'address': '29.1.0.11'},
        {'host': 'd1', 'npu': 3, 'address': '29.1.0.13'}]  # NPU 2 has no address


def test_a_host_is_not_its_own_peer_and_a_decode_host_has_none():
    assert [p['host'] for p in pd_npu_peers(hostvars(), GROUPS, 'p2', 'hccn')] == ['d2', 'd2', 'd2']
    assert pd_npu_peers(hostvars(), GROUPS, 'd1', 'hccn') == []


def test_a_slurped_hccn_conf_and_a_missing_one():
    slurp = {'content': base64.b64encode(HCCN.encode()).decode()}
    assert len(pd_npu_peers(hostvars(hccn=slurp), GROUPS, 'p1', 'hccn', slurped=True)) == 3
    assert pd_npu_peers(hostvars(hccn={}), GROUPS, 'p1', 'hccn', slurped=True) == []
    assert pd_npu_peers(hostvars(d1={'hccn': None, 'vllm_pd_instances': None}), GROUPS, 'p1', 'hccn') == []
