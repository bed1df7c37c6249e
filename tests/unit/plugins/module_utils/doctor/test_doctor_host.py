# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.env_file import parse_env_file
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_host as H
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.ip_addr import parse_ip_addr

IP_ADDR = """1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
2: data0    inet 192.168.101.31/24 brd 192.168.101.255 scope global data0\\       valid_lft forever
3: mgmt0@if12    inet 172.30.33.10/24 brd 172.30.33.255 scope global mgmt0\\       valid_lft forever
3: mgmt0    inet6 fe80::1/64 scope link \\       valid_lft forever preferred_lft forever
"""
IP_LINK = """1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default
2: data0@if7: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc noqueue state UP mode DEFAULT
"""


def test_parse_environ_and_net_env():
    env = H.parse_environ(b'PATH=/bin\0VLLM_HOST_IP=10.0.30.10\0EMPTY=\0junk\0A=b=c\0')
    assert env == {'PATH': '/bin', 'VLLM_HOST_IP': '10.0.30.10', 'EMPTY': '', 'A': 'b=c'}
    assert H.net_env(env) == {'VLLM_HOST_IP': '10.0.30.10'}
    assert H.parse_environ(None) == {}


def test_the_doctor_reads_env_files_as_systemd_does():
    """The doctor reads env files with common/env_file.py (systemd's rules): an `export NAME=` line sets nothing
    for the unit (systemd reads the name 'export NAME' and drops it), so the doctor no longer reports it as set."""
    text = '# managed\nVLLM_HOST_IP=10.0.30.10\n; note\n\nexport HCCL_IF_IP="10.0.30.10"\nX = \'y\'\nnoequals\n'
    assert parse_env_file(text) == {'VLLM_HOST_IP': '10.0.30.10', 'X': 'y'}


def test_parse_ip_addr_and_link_mtu():
    addrs = parse_ip_addr(IP_ADDR)
    assert [(a['ifname'], a['family'], a['address'], a['prefix']) for a in addrs] == [
        ('lo', 'inet', '127.0.0.1', 8), ('data0', 'inet', '192.168.101.31', 24),
        ('mgmt0', 'inet', '172.30.33.10', 24), ('mgmt0', 'inet6', 'fe80::1', 64)]
    assert H.addresses_of(addrs, 'mgmt0') == ['172.30.33.10']
    assert H.parse_link_mtu(IP_LINK) == {'lo': 65536, 'data0': 9000}


def test_parse_route_get_kinds():
    r = H.parse_route_get('192.168.101.32 dev data0 src 192.168.101.31 uid 0 \\    cache ')
    assert r == dict(type='unicast', dev='data0', src='192.168.101.31', via=None, mtu=None)
    r = H.parse_route_get('local 172.17.0.1 dev lo table local src 172.17.0.1 uid 0 \\    cache <local> ')
    assert (r['type'], r['dev']) == ('local', 'lo')
    r = H.parse_route_get('10.1.1.1 via 10.0.0.1 dev eth0 src 10.0.0.5 uid 0 \\    cache mtu lock 1400')
    assert (r['via'], r['mtu']) == ('10.0.0.1', 1400)
    assert H.parse_route_get('unreachable 10.9.9.9 uid 0')['type'] == 'unreachable'
    assert H.parse_route_get('')['type'] is None


def test_parse_default_route():
    assert H.parse_default_route('default via 172.30.33.1 dev mgmt0 \n') == 'mgmt0'
    assert H.parse_default_route('10.0.0.0/8 dev eth0\n') is None


def test_scan_log_keeps_order_counts_and_last_lines():
    lines = ['2026-12-02T14:03:%02d+0000 p1 vllm[1]: ERROR Force freed expired request: r%d. Reason: x' % (i, i)
             for i in range(5)]
    lines += ['2026-12-02T14:04:00+0000 p1 vllm[1]: RuntimeError: KV Cache sending/receiving thread failed to start.',
              '2026-12-02T14:04:01+0000 p1 vllm[1]: Failed to transfer KV cache for request r9: boom']
    hits = H.scan_log(lines, 'prefill')
    assert [h['check'] for h in hits] == ['LogKvThreadFailed', 'LogForceFreed']   # D's transfer line is not P's
    ff = hits[1]
    assert ff['count'] == 5 and len(ff['lines']) == H.LOG_EVIDENCE and ff['lines'][-1].startswith('2026-12-02T14:03:04')
    assert [h['check'] for h in H.scan_log(lines, 'decode')] == ['LogKvThreadFailed', 'LogTransferFailed']


def test_unit_pids_cgroup_and_descendants():
    pid_units = {1: 'init.scope', 100: 'vllm-pd-prefill.service', 101: None, 102: None, 200: 'grafana-server.service'}
    parents = {100: 1, 101: 100, 102: 101, 200: 1}
    assert H.unit_pids('vllm-pd-prefill.service', pid_units, 100, parents) == [100, 101, 102]
    assert H.unit_pids('vllm-pd-prefill.service', pid_units, None, parents) == [100]


def test_container_pids_cgroup_and_init_tree():
    # 200 = conmon (not the unit's child), 201 = container init, 202 its child; 300 another container
    pid_containers = {100: None, 200: None, 201: 'c1', 202: None, 300: 'c2'}
    parents = {100: 1, 200: 1, 201: 200, 202: 201, 300: 1}
    assert H.container_pids('c1', pid_containers, 201, parents) == [201, 202]
    assert H.container_pids('c1', pid_containers, None, parents) == [201]
    assert H.container_pids(None, pid_containers, None, parents) == []
    # the unit's own tree does not reach the container's processes
    assert H.unit_pids('vllm-pd-prefill.service', dict((p, None) for p in parents), 100, parents) == [100]
