# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import check_names
from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu import npu_checks as C
from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu import npu_parse as P

GOOD = dict(link='UP', net_health='Success', ip=dict(ipaddr='10.0.0.3', netmask='255.255.255.0'), tls=0, errors={})
CONF = dict(address='10.0.0.3', netmask='255.255.255.0')


def checks(fs):
    return [f['check'] for f in fs]


def test_healthy_npu_has_no_finding():
    assert C.npu_findings('h', 3, GOOD, CONF) == []


def test_each_npu_fault_is_named_with_host_npu_observed_expected_fix():
    down = dict(GOOD, link='DOWN')
    f = C.npu_findings('pd-p1', 3, down, CONF)
    assert checks(f) == ['NpuLinkDown']
    assert f[0]['host'] == 'pd-p1' and f[0]['npu'] == 3
    assert f[0]['observed'] == 'link status: DOWN' and f[0]['expected'] == 'link status: UP'
    assert 'Fix:' in f[0]['msg'] and f[0]['fix']
    assert checks(C.npu_findings('h', 3, dict(GOOD, net_health='Socket fail'), CONF)) == ['NpuNetUnhealthy']
    mism = C.npu_findings('h', 3, GOOD, dict(CONF, address='10.0.0.99'))
    assert checks(mism) == ['HccnConfMismatch'] and mism[0]['expected'] == 'address_3=10.0.0.99'
    assert checks(C.npu_findings('h', 3, GOOD, dict(CONF, netmask='255.255.0.0'))) == ['HccnConfMismatch']
    assert checks(C.npu_findings('h', 3, dict(GOOD, ip=dict(ipaddr=None, netmask=None)), CONF)) == ['HccnConfMismatch']
    assert checks(C.npu_findings('h', 3, GOOD, {})) == ['HccnConfMissing']
    assert checks(C.npu_findings('h', 3, dict(GOOD, link=None, errors={'-link': 'rc=1'}), CONF)) == ['NpuToolFailed']


SMI = dict(chips={0: dict(npu=0, chip=0, health='OK', name='910B3'), 1: dict(npu=1, chip=0, health='Critical', name='910B3')},
           processes=[dict(npu=0, chip=0, phy_id=0, pid=42, name='', memory_mb=100),
                      dict(npu=0, chip=0, phy_id=0, pid=7, name='', memory_mb=100)])


def test_processes_and_health():
    f = C.process_findings('h', [0, 1, 2], SMI, own_pids={7})
    assert checks(f) == ['NpuUnhealthy', 'NpuUnhealthy', 'NpuBusy']
    assert f[0]['npu'] == 1 and f[0]['observed'] == 'Health Critical'
    assert f[1]['npu'] == 2                       # not listed at all
    assert f[2]['npu'] == 0 and 'pid 42' in f[2]['observed']
    assert C.process_findings('h', [0], SMI, own_pids={7, 42}) == []


def test_ping_plan_covers_every_npu_of_both_sides():
    peers = [dict(host='d1', npu=n, address='10.1.0.%d' % n) for n in range(16)]
    plan = C.ping_plan(list(range(8)), peers)
    assert len(plan) == 16
    assert set(p[0] for p in plan) == set(range(8)) and set(p[1]['npu'] for p in plan) == set(range(16))
    two = C.ping_plan([0, 1], peers[:1] + [dict(host='d2', npu=0, address='10.2.0.0')])
    assert [(a, b['host']) for a, b in two] == [(0, 'd1'), (1, 'd1'), (0, 'd2'), (1, 'd2')]
    assert C.ping_plan([], peers) == []


def test_ping_findings():
    peer = dict(host='d1', npu=5, address='10.1.0.5')
    ok = P.parse_ping('3 packets transmitted, 3 received, 0.00% packet loss')
    lost = P.parse_ping('recv time out seq=0\n3 packets transmitted, 2 received, 33.33% packet loss')
    assert C.ping_findings('p1', [(0, peer, ok, None)]) == []
    f = C.ping_findings('p1', [(0, peer, lost, 'Command execute failed!'), (1, peer, None, 'rc=1')])
    assert checks(f) == ['NpuUnreachable', 'NpuUnreachable']
    assert f[0]['observed'] == '2/3 received' and 'd1 NPU 5' in f[0]['expected']


def test_cluster_tls_and_versions_name_the_odd_one_out():
    reports = [dict(host='p1', tls={'0': 0, '1': 0}, driver_version='25.2.0', cann_version='8.5.1'),
               dict(host='d1', tls={'0': 0, '1': 1}, driver_version='25.2.0', cann_version='8.5.1'),
               dict(host='d2', tls={'0': 0}, driver_version='24.1.0', cann_version='8.5.1')]
    f = C.cluster_findings(reports)
    assert [(x['check'], x['host'], x['npu']) for x in f] == [('TlsMismatch', 'd1', '1'), ('VersionMismatch', 'd2', None)]
    assert C.cluster_findings(reports[:1]) == []
    tie = C.cluster_findings([dict(host='p1', tls={}, driver_version='25.2.0'), dict(host='d1', tls={}, driver_version='24.1.0')])
    assert [(x['check'], x['host'], x['expected']) for x in tie] == [
        ('VersionMismatch', 'p1', 'driver 24.1.0 on d1'), ('VersionMismatch', 'd1', 'driver 25.2.0 on p1')]


def test_versions_and_compat_table():
    assert checks(C.version_findings('h', None, '8.5.1')) == ['VersionUnreadable']
    assert checks(C.version_findings('h', '25.2.0', '8.5.1', 'v0.23.0')) == ['CannIncompatible']
    assert C.version_findings('h', '25.2.0', '9.1.0', 'v0.23.0') == []
    assert C.version_findings('h', '25.2.0', '8.5.1', 'v9.9.9') == []   # not in the table: no claim
    assert C.cann_note('v9.9.9') is not None and 'no CANN row' in C.cann_note('v9.9.9')
    assert C.cann_note('') is not None
    assert C.cann_note('v0.23.0') is None


@pytest.mark.parametrize('version, right, wrong', [
    ('0.23.0.post1', '9.1.0', '8.5.1'),   # what pip prints: a post release of 0.23.0
    ('v0.23.0', '9.1.0', '8.5.1'),
    ('0.18.0', '8.5.1', '8.5.0'),         # pip's spelling, without the v
    ('0.13.0', '8.5.0', '8.3.RC2'),
    ('0.11.0', '8.3.RC2', '8.5.1'),
    ('0.23.0rc1', '9.0.1', '9.1.0'),
])
def test_cann_is_checked_for_every_spelling_of_a_known_release(version, right, wrong):
    assert C.version_findings('h', '25.2.0', right, version) == []
    assert checks(C.version_findings('h', '25.2.0', wrong, version)) == ['CannIncompatible']
    assert C.cann_note(version) is None


def test_container_options():
    bad = C.container_findings('h', [], conf_exists=True)
    assert checks(bad) == ['ContainerMountMissing', 'ContainerMountMissing', 'ShmTooSmall', 'MemlockLimited']
    assert bad[2]['observed'] == '/dev/shm 64 MB'
    good = ['--volume=/etc/hccn.conf:/etc/hccn.conf:ro',
            '--volume=/usr/local/Ascend/driver/tools/hccn_tool:/usr/local/Ascend/driver/tools/hccn_tool:ro',
            '--shm-size=16g', '--ulimit=memlock=-1:-1']
    assert C.container_findings('h', good, conf_exists=True) == []


def test_split_ignored_and_names():
    fs = [dict(check='NpuBusy'), dict(check='NpuLinkDown')]
    assert C.split_ignored(fs, ['NpuBusy']) == ([dict(check='NpuLinkDown')], [dict(check='NpuBusy')])
    assert check_names.validate_ignore(['NpuBusy', 'PortBusy']) is None
    msg = check_names.validate_ignore(['NpuBussy'])
    assert 'vllm_pd_ignore_checks' in msg and 'NpuBussy' in msg and 'NpuBusy' in msg
    assert 'cannot be ignored' in check_names.validate_ignore(['InventoryInvalid'])
    assert check_names.validate_ignore('NpuBusy').startswith('vllm_pd_ignore_checks must be a list')
