# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""monitoring_ports: what the PD plan takes on a host, and the operator's monitoring ports against it.
The rule runs end to end in tests/unit/hostile/test_inventory_hostile.py (rows grafana_in_group ...)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import check_names
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import inventory_rules as ir
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import monitoring_ports as M
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_windows import reserved_windows


@pytest.mark.parametrize('raw, want', [
    ([3000, '9090', 3000], [3000, 9090]),
    ([], []),
])
def test_parse_ports(raw, want):
    assert M.parse_ports(raw) == (want, None)


@pytest.mark.parametrize('raw, words', [
    ('3000', 'must be a list'), ({'grafana': 3000}, 'must be a list'), ([True], '[0]=True'), ([0], '[0]=0'),
    ([65536], '[0]=65536'), (['30x'], "[0]='30x'"), ([3.5], '[0]=3.5'),
])
def test_parse_ports_refuses(raw, words):
    ports, why = M.parse_ports(raw)
    assert ports is None and words in why and M.VARIABLE in why


def test_engine_taken_follows_the_plan():
    # internal DP: one instance, groups of both ranks; external DP: one instance per rank, API port + index
    [(lo, hi, what, _fix), api] = M.engine_taken('prefill', 28000, 4, 2, [], 8100)
    assert (lo, hi) == (28000, 28007) and 'instance prefill ' in what and api[:2] == (8100, 8100)
    taken = M.engine_taken('prefill', 28000, 4, 4, [2, 3], 8100, 12342)
    assert [t[:2] for t in taken] == [(28008, 28011), (8100, 8100), (28012, 28015), (8101, 8101)]
    assert 'prefill-dp3' in taken[2][2]
    # rank 0 of external DP also binds the DP RPC port; a decode instance binds no group
    assert [t[:2] for t in M.engine_taken('decode', 28100, 2, 2, [0], 8200, 12352)] == [(8200, 8200), (12352, 12352)]


def test_windows_follow_port_group():
    # the windows kv_port_group checks, from the engine env (port_windows.reserved_windows)
    w = M.windows_taken(reserved_windows({}, 16))
    assert [x[:2] for x in w] == [(20000, 35999), (15000, 17000), (60000, 60031)]
    w = M.windows_taken(reserved_windows({'ASCEND_BASE_PORT': '40000', 'MC_MIN_RPC_PORT': '41000',
                                          'MC_MAX_RPC_PORT': '41500', 'HCCL_IF_BASE_PORT': '50000'}, 8))
    assert [x[:2] for x in w] == [(40000, 47999), (41000, 41500), (50000, 50031)]


def test_engine_taken_widens_with_pp_and_pcp():
    [(lo, hi, what, _fix), _api] = M.engine_taken('prefill', 28000, 2, 2, [1], 8100, pp=2, pcp=2)
    assert (lo, hi) == (28008, 28015) and 'tp 2, pp 2, pcp 2' in what


def test_collisions_name_port_group_and_fix():
    taken = M.engine_taken('prefill', 28000, 8, 1, [], 8100)
    [(port, msg, fix)] = M.collisions([3000, 28005], taken)
    assert port == 28005 and 'kv_port group 28000-28007 of instance prefill' in msg and M.CHECK in msg
    assert 'vllm_pd_monitoring_ports' in fix and 'vllm_pd_kv_port' in fix
    assert M.collisions(list(M.DEFAULT_MONITORING_PORTS), taken + M.windows_taken(reserved_windows({}, 8))) == []


def _view(**p):
    base = dict(vllm_pd_cluster='a', vllm_pd_network='10.0.0.0/24', vllm_pd_model='m', vllm_pd_kv_port=28000,
                vllm_pd_prefill_tp_size=2, vllm_pd_decode_tp_size=2)
    return {'groups': {'vllm_pd_prefill': ['p1'], 'vllm_pd_decode': ['d1'], 'vllm_pd_proxy': ['p1']},
            'hosts': {'p1': dict(base, **p), 'd1': dict(base)}}


def test_the_rule_is_a_named_ignorable_check():
    assert ir.inventory_errors(_view()) == []  # the defaults clear the default plan
    [adxl] = ir.inventory_errors(_view(vllm_pd_monitoring_ports=[21000]))
    assert 'ADXL) window 20000-27999' in adxl['text']
    [f] = ir.inventory_errors(_view(vllm_pd_monitoring_ports=[28001]))
    assert (f['cluster'], f['host'], f['variable'], f['check']) == ('a', 'p1', M.VARIABLE, M.CHECK)
    assert M.CHECK in check_names.CHECKS and not check_names.unknown([M.CHECK])
    # a bad value cannot be ignored: it describes no port at all
    [bad] = ir.inventory_errors(_view(vllm_pd_monitoring_ports='x'))
    assert bad['check'] == 'InventoryInvalid'
