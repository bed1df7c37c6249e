# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import socket

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import sockets as S

HEADER = ('  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n')


def line(addr, port, state='0A', raddr=None, rport=0, inode=1000, uid=0):
    raddr = raddr or ('::' if ':' in addr else '0.0.0.0')
    return '   0: %s:%04X %s:%04X %s 00000000:00000000 00:00000000 00000000 %5d 0 %d 1 0000000000000000 100 0 0 10 0\n' % (
        S.pack_ip_for_test(addr), port, S.pack_ip_for_test(raddr), rport, state, uid, inode)


def test_parse_v4_and_state_names():
    text = HEADER + line('10.0.30.10', 30002, inode=11) + line('127.0.0.1', 30003, '01', '127.0.0.1', 5555, 12) \
        + line('0.0.0.0', 30004, '06', inode=0)
    socks = S.parse_proc_net_tcp(text)
    assert [(s['address'], s['port'], s['state'], s['inode']) for s in socks] == [
        ('10.0.30.10', 30002, 'LISTEN', 11), ('127.0.0.1', 30003, 'ESTABLISHED', 12),
        ('0.0.0.0', 30004, 'TIME_WAIT', 0)]
    assert socks[1]['remote_port'] == 5555


def test_parse_known_little_endian_literal():
    # what a little-endian kernel prints for 127.0.0.1:8080 and [::1]:8080
    t4 = HEADER + '   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 77 1 0 100 0 0 10 0\n'
    assert S.parse_proc_net_tcp(t4, byteorder='little')[0]['address'] == '127.0.0.1'
    t6 = HEADER + ('   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A '
                   '00000000:00000000 00:00000000 00000000 0 0 78 1 0 100 0 0 10 0\n')
    s = S.parse_proc_net_tcp(t6, 'tcp6', byteorder='little')[0]
    assert (s['address'], s['port'], s['family']) == ('::1', 8080, 'tcp6')
    mapped = HEADER + ('   0: 0000000000000000FFFF00000A1E000A:7532 00000000000000000000000000000000:0000 0A '
                       '00000000:00000000 00:00000000 00000000 0 0 79 1 0 100 0 0 10 0\n')
    assert S.parse_proc_net_tcp(mapped, 'tcp6', byteorder='little')[0]['address'] == '10.0.30.10'


def test_prefilter_matches_the_local_port_only():
    # 30003 as the remote port of a connection and as the state-like text must not select the line
    text = HEADER + line('127.0.0.1', 40000, '01', '127.0.0.1', 30003, 21) + line('::1', 30003, inode=22) \
        + line('10.0.30.10', 30003, inode=23)
    assert [s['inode'] for s in S.parse_proc_net_tcp(text, 'tcp6', ports=[30003])] == [22, 23]
    assert S.lines_with_local_port(text, []) == []
    last = line('0.0.0.0', 30004, inode=24).rstrip('\n')     # no newline at the end of the text
    assert S.lines_with_local_port(HEADER + last, [30004]) == [last]


def test_parse_port_prefilter_and_garbage():
    text = HEADER + line('0.0.0.0', 30002) + line('0.0.0.0', 30003) + 'garbage line\n' + line('0.0.0.0', 0, '07')
    assert [s['port'] for s in S.parse_proc_net_tcp(text, ports={30003})] == [30003]
    assert [s['port'] for s in S.parse_proc_net_tcp(text)] == [30002, 30003]


@pytest.mark.parametrize('sock_addr, fam, host, blocks', [
    ('10.0.30.10', 'tcp', '10.0.30.10', True),
    ('0.0.0.0', 'tcp', '10.0.30.10', True),
    ('::', 'tcp6', '10.0.30.10', True),          # dual-stack wildcard
    ('10.0.30.10', 'tcp6', '10.0.30.10', True),  # v4-mapped, normalised
    ('127.0.0.1', 'tcp', '10.0.30.10', False),
    ('10.0.30.11', 'tcp', '10.0.30.10', False),
    ('::1', 'tcp6', '10.0.30.10', False),
    ('127.0.0.1', 'tcp', '0.0.0.0', True),
    ('::', 'tcp6', '0.0.0.0', True),
    ('::1', 'tcp6', '0.0.0.0', False),
    ('::1', 'tcp6', '::', True),
    ('127.0.0.1', 'tcp', '::', True),
    ('0.0.0.0', 'tcp', 'fd00::1', False),
    ('::', 'tcp6', 'fd00::1', True),
    ('fd00::1', 'tcp6', 'fd00::1', True),
    ('fd00::2', 'tcp6', 'fd00::1', False),
])
def test_addresses_overlap(sock_addr, fam, host, blocks):
    assert S.addresses_overlap(sock_addr, fam, host) is blocks


@pytest.mark.parametrize('state, blocks', [
    ('LISTEN', True), ('CLOSE', True), ('ESTABLISHED', True), ('CLOSE_WAIT', True),
    ('TIME_WAIT', False), ('SYN_RECV', False), ('NEW_SYN_RECV', False),
])
def test_blocks_bind_by_state(state, blocks):
    s = dict(state=state, address='0.0.0.0', family='tcp', port=1)
    assert S.blocks_bind(s, '10.0.30.10') is blocks


def test_classify_misleading():
    socks = [dict(state='LISTEN', address='127.0.0.1', family='tcp', port=30003, inode=1),
             dict(state='LISTEN', address='0.0.0.0', family='tcp', port=30004, inode=2),
             dict(state='LISTEN', address='0.0.0.0', family='tcp', port=40000, inode=3)]
    blocking, misleading = S.classify(socks, [30002, 30003, 30004], '10.0.30.10')
    assert [s['port'] for s in blocking] == [30004]
    assert [s['port'] for s in misleading] == [30003]


def test_normalize_ip():
    assert S.normalize_ip('::ffff:10.0.0.1') == '10.0.0.1'
    assert S.normalize_ip('[fd00:0::1]') == 'fd00::1'
    assert S.normalize_ip('010.0.0.1') == '010.0.0.1' or S.normalize_ip('010.0.0.1')
    assert S.format_endpoint('::1', 5) == '[::1]:5'


def _bound(fam, addr, port, listen=True):
    s = socket.socket(fam, socket.SOCK_STREAM)
    if fam == socket.AF_INET6 and addr != '::':
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, port))
    if listen:
        s.listen(1)
    return s


def _has_ipv6():
    try:
        socket.socket(socket.AF_INET6).close()
        return os.path.exists('/proc/net/tcp6')
    except OSError:
        return False


def test_real_sockets_in_proc(free_group):
    ports = free_group(5)
    opened = [_bound(socket.AF_INET, '127.0.0.2', ports[0]), _bound(socket.AF_INET, '0.0.0.0', ports[1]),
              _bound(socket.AF_INET, '127.0.0.1', ports[2]), _bound(socket.AF_INET, '127.0.0.2', ports[3], False)]
    try:
        socks = S.read_tcp_sockets(ports=set(ports))
        got = dict((s['port'], (s['address'], s['state'])) for s in socks)
        assert got[ports[0]] == ('127.0.0.2', 'LISTEN')
        assert got[ports[1]] == ('0.0.0.0', 'LISTEN')
        # a bound-but-not-listening socket is in no /proc/net/tcp hash table: invisible
        # here (the module's bind probe catches it)
        assert ports[3] not in got
        assert ports[4] not in got
        inode = os.fstat(opened[0].fileno()).st_ino
        assert any(s['inode'] == inode for s in socks if s['port'] == ports[0])
        blocking, misleading = S.classify(socks, ports, '127.0.0.2')
        assert sorted(s['port'] for s in blocking) == [ports[0], ports[1]]
        assert [s['port'] for s in misleading] == [ports[2]]
    finally:
        for s in opened:
            s.close()


def test_real_established_blocks(free_group):
    port = free_group(1)[0]
    srv = _bound(socket.AF_INET, '127.0.0.1', port)
    cli = socket.create_connection(('127.0.0.1', port))
    acc = srv.accept()[0]
    srv.close()   # listener gone; the accepted connection still uses the port
    try:
        socks = S.read_tcp_sockets(ports={port})
        states = sorted(s['state'] for s in socks if s['port'] == port)
        assert 'ESTABLISHED' in states
        blocking, _mis = S.classify(socks, [port], '127.0.0.1')
        assert blocking and all(s['state'] != 'TIME_WAIT' for s in blocking)
    finally:
        acc.close()
        cli.close()


@pytest.mark.skipif(not _has_ipv6(), reason='no IPv6')
def test_real_ipv6_listeners(free_group):
    ports = free_group(2)
    try:
        a = _bound(socket.AF_INET6, '::1', ports[0])
        b = _bound(socket.AF_INET6, '::', ports[1])
    except OSError as e:
        pytest.skip('cannot bind IPv6: %s' % e)
    try:
        socks = S.read_tcp_sockets(ports=set(ports))
        got = dict((s['port'], (s['address'], s['family'])) for s in socks)
        assert got[ports[0]] == ('::1', 'tcp6')
        assert got[ports[1]] == ('::', 'tcp6')
        blocking, misleading = S.classify(socks, ports, '127.0.0.2')
        assert [s['port'] for s in blocking] == [ports[1]]    # :: blocks v4 too
        assert [s['port'] for s in misleading] == [ports[0]]
    finally:
        a.close()
        b.close()
