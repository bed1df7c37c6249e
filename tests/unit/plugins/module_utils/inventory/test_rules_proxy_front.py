# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rule_proxy_front: the proxy tier's variables on a proxy host, each finding naming variable, host and fix."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import inventory_rules as ir
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_proxy import rule_proxy_front

BASE = dict(vllm_pd_cluster='a', vllm_pd_network='10.0.0.0/24', vllm_pd_model='m', vllm_pd_kv_port=30000,
            vllm_pd_prefill_tp_size=2, vllm_pd_decode_tp_size=2)


def view(rollout='parallel', **p):
    return {'groups': {'vllm_pd_prefill': ['p1'], 'vllm_pd_decode': ['d1'], 'vllm_pd_proxy': ['p1'],
                       'cluster_a': ['p1', 'd1']},
            'hosts': {'p1': dict(BASE, **p), 'd1': dict(BASE)}, 'rollout': rollout}


def findings(data):
    return [f for f in ir.inventory_errors(data) if f['variable'].startswith(('vllm_pd_proxy_front', 'proxy_front'))]


@pytest.mark.parametrize('p', [{}, dict(vllm_pd_proxy_front='none'), dict(vllm_pd_proxy_front='haproxy'),
                               dict(vllm_pd_proxy_front='haproxy', vllm_pd_proxy_front_processes=4,
                                    vllm_pd_proxy_front_base_port=9001)])
def test_a_good_front_has_no_finding(p):
    assert ir.inventory_errors(view(**p)) == []


def test_a_bad_front_names_variable_host_and_fix():
    [f] = findings(view(vllm_pd_proxy_front='nginx'))
    assert (f['cluster'], f['host'], f['variable']) == ('a', 'p1', 'vllm_pd_proxy_front')
    assert 'nginx is not a proxy front (none, haproxy)' in f['message']
    assert 'vllm_pd_proxy_front: haproxy' in f['fix'] and 'vllm_pd_proxy_front: none' in f['fix']


def test_the_role_variable_is_named_when_it_is_the_one_set():
    [f] = findings(view(vllm_pd_proxy_front='haproxy', proxy_front='HAProxy'))
    assert f['variable'] == 'proxy_front'


@pytest.mark.parametrize('n', [0, -1, 17, 'two', True, 1.5])
def test_the_processes_are_a_whole_number_from_1(n):
    [f] = findings(view(vllm_pd_proxy_front='haproxy', vllm_pd_proxy_front_processes=n))
    assert f['variable'] == 'vllm_pd_proxy_front_processes' and 'from 1 to 16' in f['message']


def test_the_loopback_ports_stay_within_tcp_and_off_the_proxy_port():
    [f] = findings(view(vllm_pd_proxy_front='haproxy', vllm_pd_proxy_front_base_port=65535))
    assert 'beyond 65535' in f['message']
    [f] = findings(view(vllm_pd_proxy_front='haproxy', vllm_pd_proxy_front_base_port=7999))
    assert f['variable'] == 'vllm_pd_proxy_front_base_port' and 'proxy port' in f['message']


def test_a_rolling_change_with_the_tier_is_refused_for_now():
    [f] = findings(view(rollout='rolling', vllm_pd_proxy_front='haproxy'))
    assert 'rolling' in f['message'] and 'vllm_pd_proxy_front: none' in f['fix']


def test_the_rule_runs_in_the_inventory_check():
    assert rule_proxy_front in ir.RULES


@pytest.mark.parametrize('port, what', [(-1, 'must be a TCP port'), (70000, 'must be a TCP port'), ('x', 'must be a TCP port'),
                                        (8000, 'are both 8000 on one host'), (18002, 'the loopback port of a proxy process')])
def test_the_exporter_port_is_a_port_of_its_own(port, what):
    [f] = findings(view(vllm_pd_proxy_front='haproxy', vllm_pd_proxy_front_metrics_port=port))
    assert f['variable'] == 'vllm_pd_proxy_front_metrics_port' and what in f['message'], f
    assert ir.inventory_errors(view(vllm_pd_proxy_front='haproxy', vllm_pd_proxy_front_metrics_port=0)) == []


def test_the_exporter_port_is_a_pd_port_for_the_group_and_the_monitoring_ports():
    inside = [f for f in ir.inventory_errors(view(vllm_pd_proxy_front='haproxy', vllm_pd_proxy_front_metrics_port=30001))
              if f['variable'] == 'vllm_pd_proxy_front_metrics_port']
    assert len(inside) == 1 and 'lies inside the prefill port group' in inside[0]['message'], inside
    [f] = ir.inventory_errors(view(vllm_pd_proxy_front='haproxy', vllm_pd_monitoring_ports=[3000, 8405]))
    assert f['check'] == 'MonitoringPortCollision' and "HAProxy's Prometheus exporter port 8405" in f['message'], f
    # without the tier nothing listens there
    assert ir.inventory_errors(view(vllm_pd_monitoring_ports=[3000, 8405])) == []
