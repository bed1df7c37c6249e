# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rule_group_windows: a prefill port group inside a reserved window is an inventory error, named before any host
is contacted, in the words and under the check names of the preflight's kv_port_group check."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import inventory_rules as ir
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_free import static_findings

BASE = dict(vllm_pd_cluster='a', vllm_pd_network='10.0.0.0/24', vllm_pd_model='m', vllm_pd_kv_port=30000,
            vllm_pd_prefill_tp_size=2, vllm_pd_decode_tp_size=2)


def window_errors(**p):
    hosts = {'p1': dict(BASE, **p), 'd1': dict(BASE)}
    groups = {'vllm_pd_prefill': ['p1'], 'vllm_pd_decode': ['d1'], 'vllm_pd_proxy': ['p1'], 'cluster_a': ['p1', 'd1']}
    return [f for f in ir.inventory_errors({'groups': groups, 'hosts': hosts}) if f['check'] != 'InventoryInvalid']


def test_a_group_inside_the_adxl_window_is_the_preflights_finding():
    [f] = window_errors(vllm_pd_kv_port=20100, vllm_pd_npu_count=8)
    assert (f['cluster'], f['host'], f['variable'], f['check']) == ('a', 'p1', 'vllm_pd_kv_port', 'AdxlWindow')
    # the same words the host's kv_port_group check says for the same group and window
    [module] = static_findings([20100, 20101], (20000, 27999), [], [], None, (None, None))[0]
    assert f['message'] == '[AdxlWindow] ' + module['msg']
    assert 'window 20000-27999' in f['message'] and f['fix'].startswith('choose vllm_pd_kv_port')


def test_without_npu_count_the_window_counts_only_the_npus_the_host_surely_has():
    # tp 2 on P: at least 2 NPUs, so 20000-21999 is surely the window; 22000 may be too, the host check says
    [f] = window_errors(vllm_pd_kv_port=21998)
    assert 'window 20000-21999' in f['message'] and 'counts 2 NPUs' in f['message']
    assert window_errors(vllm_pd_kv_port=22000) == []
    # a listed NPU id widens it
    [f] = window_errors(vllm_pd_kv_port=23000, prefill_devices=[2, 3])
    assert 'window 20000-23999' in f['message']


def test_the_engine_env_moves_the_windows_it_names():
    env = {'ASCEND_BASE_PORT': '40000', 'MC_MIN_RPC_PORT': '29990', 'MC_MAX_RPC_PORT': '30000',
           'HCCL_IF_BASE_PORT': '29970'}
    found = window_errors(vllm_pd_npu_count=8, prefill_env=env)
    assert sorted(f['check'] for f in found) == ['HcclRange', 'TeRpcRange']
    assert all(f['fix'].endswith('move the window in prefill_env') for f in found)
    assert window_errors(vllm_pd_kv_port=40100, vllm_pd_npu_count=8, prefill_env=env)[0]['check'] == 'AdxlWindow'


def test_only_the_groups_of_the_ranks_this_host_serves_count():
    # DP 2, this host serves rank 1 only: its group is kv_port+2 .. kv_port+3
    common = dict(vllm_pd_prefill_dp_size=2, vllm_pd_prefill_dp_ranks=[1], vllm_pd_npu_count=8)
    assert window_errors(vllm_pd_kv_port=27998, **common) == []
    [f] = window_errors(vllm_pd_kv_port=27996, **common)
    assert 'port(s) 27998-27999 of the group' in f['message']


def test_a_retiring_host_starts_nothing_and_is_not_checked():
    assert window_errors(vllm_pd_kv_port=20100, vllm_pd_npu_count=8, vllm_pd_state='absent') == []
