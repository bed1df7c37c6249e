# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NPU layer in the doctor's order: after the port group, before ZMTP reachability."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_report import render_html
from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu.npu_checks import finding
from test_doctor_findings import P_IP, checks, cluster, eng, probes, run


def npu(host, findings=(), tls=None, driver='25.2.0'):
    return dict(findings=list(findings), tools_missing=[], tls=tls or {'0': 0}, driver_version=driver,
                cann_version='8.5.1')


def test_npu_fault_is_the_root_cause_of_a_running_deployment():
    hosts = cluster()
    hosts['p1']['npu'] = npu('p1')
    hosts['d1']['npu'] = npu('d1', [finding('NpuUnhealthy', 'd1', 4, 'Health Alarm', 'Health OK', 'repair', 'the NPU is not healthy')])
    fs, cl = run(hosts)
    assert cl['c1']['root_cause']['check'] == 'NpuUnhealthy' and cl['c1']['root_cause']['host'] == 'd1'
    assert 'observed: Health Alarm' in cl['c1']['root_cause']['evidence']


def test_port_group_comes_first_zmtp_after():
    hosts = cluster()
    eng(hosts, 'p1')['group']['closed'] = [28003]
    hosts['d1']['probe']['targets'][0]['probes'] = probes(P_IP, result='refused')
    hosts['p1']['npu'] = npu('p1', tls={'0': 1})
    hosts['d1']['npu'] = npu('d1', tls={'0': 0, '1': 0}, driver='24.1.0')
    fs, _clusters = run(hosts)
    order = checks(fs)
    assert 'TlsMismatch' in order and 'VersionMismatch' in order
    first_npu = min(order.index('TlsMismatch'), order.index('VersionMismatch'))
    assert all(order.index(c) < first_npu for c in order if c.startswith('Port'))
    assert all(order.index(c) > first_npu for c in ('ZmtpNotReachable',) if c in order)


def test_tools_missing_is_a_warning_and_in_the_html():
    hosts = cluster()
    hosts['p1']['npu'] = dict(findings=[finding('NpuToolsMissing', 'p1', None, 'missing: hccn_tool', 'tools', 'install',
                                                'no hccn_tool on this host')], tools_missing=['hccn_tool'])
    fs, cl = run(hosts)
    assert [f['severity'] for f in fs if f['check'] == 'NpuToolsMissing'] == ['warning']
    assert cl['c1']['root_cause'] is None
    assert 'NpuToolsMissing' in render_html(list(cl.values()), fs)
