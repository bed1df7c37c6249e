# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one rule of cluster membership (issue 36): common/membership.cluster_hosts and its filter pd_cluster_hosts."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_cluster_hosts import pd_cluster_hosts
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.membership import as_int, cluster_hosts, retiring

GROUPS = {'all': ['p1', 'pd2', 'd1', 'x', 'gone', 'd9'], 'vllm_pd_prefill': ['p1', 'pd2', 'gone'],
          'vllm_pd_decode': ['pd2', 'd1', 'd9'], 'vllm_pd_proxy': ['p1']}
HOSTVARS = {'p1': {'vllm_pd_cluster': 7}, 'pd2': {'vllm_pd_cluster': '7'}, 'd1': {'vllm_pd_cluster': '7'},
            'x': {}, 'gone': {'vllm_pd_cluster': '7', 'vllm_pd_state': 'absent'}, 'd9': {'vllm_pd_cluster': 'b'}}


def test_a_cluster_is_compared_as_text_and_a_host_without_one_is_in_none():
    assert cluster_hosts(GROUPS, HOSTVARS, '7') == ['p1', 'pd2', 'd1', 'gone']
    assert cluster_hosts(GROUPS, HOSTVARS, 7) == ['p1', 'pd2', 'd1', 'gone']
    assert cluster_hosts(GROUPS, HOSTVARS, '') == []


def test_one_kind_takes_its_group_order_and_several_kinds_the_inventory_order():
    assert cluster_hosts(GROUPS, HOSTVARS, '7', 'decode') == ['pd2', 'd1']
    assert cluster_hosts(GROUPS, HOSTVARS, '7', ['proxy', 'decode']) == ['p1', 'pd2', 'd1']


def test_the_given_hosts_keep_their_order_once_each_and_unknown_hosts_are_left_out():
    assert cluster_hosts(GROUPS, HOSTVARS, '7', hosts=['d1', 'nobody', 'p1', 'd1', 'd9']) == ['d1', 'p1']
    assert cluster_hosts(GROUPS, HOSTVARS, '7', 'prefill', hosts=['d1', 'gone', 'p1']) == ['gone', 'p1']


def test_present_leaves_out_the_retiring_hosts():
    assert cluster_hosts(GROUPS, HOSTVARS, '7', 'prefill', present=True) == ['p1', 'pd2']
    assert retiring({'vllm_pd_state': 'absent'}) and not retiring({}) and not retiring({'vllm_pd_state': 'present'})


def test_the_filter_reads_the_same_rule():
    assert pd_cluster_hosts(HOSTVARS, GROUPS, '7', kinds=['prefill'], present=True) == ['p1', 'pd2']
    assert pd_cluster_hosts(HOSTVARS, GROUPS, 'b') == ['d9']
    assert pd_cluster_hosts(HOSTVARS, GROUPS, '7', kinds=[], hosts=['x', 'd1']) == ['d1']


@pytest.mark.parametrize('value, want', [(3, 3), ('4', 4), ('2.0', 2), (None, 0), ('', 0), ('tp', 0)])
def test_as_int_is_jinjas_int(value, want):
    assert as_int(value) == want
