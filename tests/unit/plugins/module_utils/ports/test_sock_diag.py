# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import os
import socket
import struct

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import sock_diag as D
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import sockets as S


def run_bytecode(code, sport):
    """The kernel's inet_diag_bc_run() for the port comparisons: True when the socket is kept."""
    pos, left = 0, len(code)
    while left > 0:
        op, yes, no = struct.unpack_from('=BBH', code, pos)
        if op == D.INET_DIAG_BC_S_GE:
            ok = sport >= struct.unpack_from('=BBH', code, pos + 4)[2]
        elif op == D.INET_DIAG_BC_S_LE:
            ok = sport <= struct.unpack_from('=BBH', code, pos + 4)[2]
        else:
            raise AssertionError('unexpected op %d' % op)
        step = yes if ok else no
        pos, left = pos + step, left - step
    return left == 0


def test_port_range_bytecode_keeps_the_span_only():
    code = D.port_range_bytecode(28002, 28009)
    assert len(code) == 16
    kept = [p for p in (1, 28001, 28002, 28005, 28009, 28010, 65535) if run_bytecode(code, p)]
    assert kept == [28002, 28005, 28009]
    # every jump lands on an op or exactly 4 bytes past the end (the kernel's audit rule)
    for pos in (0, 8):
        _op, yes, no = struct.unpack_from('=BBH', code, pos)
        for step in (yes, no):
            assert step % 4 == 0 and pos + step <= len(code) + 4


def test_build_request_layout():
    req = D.build_request(socket.AF_INET6, 7, (28002, 28009))
    length, msg_type, flags, seq, pid = struct.unpack_from('=IHHII', req)
    assert (length, msg_type, flags, seq, pid) == (len(req), D.SOCK_DIAG_BY_FAMILY, 0x301, 7, 0)
    family, proto, ext, _pad, states = struct.unpack_from('=BBBBI', req, 16)
    assert (family, proto, ext, states) == (socket.AF_INET6, socket.IPPROTO_TCP, 0, D.ALL_TCP_STATES)
    assert req[24:72] == b'\0' * 48                       # no socket id: a dump
    attr_len, attr_type = struct.unpack_from('=HH', req, 72)
    assert (attr_len, attr_type) == (4 + 16, D.INET_DIAG_REQ_BYTECODE)
    assert req[76:] == D.port_range_bytecode(28002, 28009)
    assert len(D.build_request(socket.AF_INET, 1)) == 16 + 56    # no filter attribute


def nlmsg(msg_type, seq, payload):
    return struct.pack('=IHHII', 16 + len(payload), msg_type, 2, seq, 0) + payload + b'\0' * (-len(payload) % 4)


def diag(family, state, src, sport, dst='', dport=0, uid=0, inode=0):
    def raw(addr):
        if not addr:
            return b'\0' * 16
        packed = socket.inet_pton(family, addr)
        return packed + b'\0' * (16 - len(packed))
    return struct.pack('=BBBBHH16s16sI8xIIIII', family, state, 0, 0, socket.htons(sport), socket.htons(dport),
                       raw(src), raw(dst), 0, 0, 0, 0, uid, inode)


def test_parse_messages_records_like_proc():
    data = b''.join((
        nlmsg(D.SOCK_DIAG_BY_FAMILY, 3, diag(socket.AF_INET, 10, '0.0.0.0', 28005, uid=1000, inode=77)),
        nlmsg(D.SOCK_DIAG_BY_FAMILY, 3, diag(socket.AF_INET6, 1, '::1', 28003, '::1', 40000, inode=78)),
        nlmsg(D.SOCK_DIAG_BY_FAMILY, 3, diag(socket.AF_INET6, 10, '::ffff:10.0.30.10', 28004, inode=79)),
        nlmsg(D.SOCK_DIAG_BY_FAMILY, 3, diag(socket.AF_INET, 6, '127.0.0.1', 28006)),
        nlmsg(D.SOCK_DIAG_BY_FAMILY, 3, diag(socket.AF_INET, 7, '0.0.0.0', 0, inode=80)),   # no port: dropped
        nlmsg(D.SOCK_DIAG_BY_FAMILY, 9, diag(socket.AF_INET, 10, '0.0.0.0', 1, inode=81)),  # another request
    ))
    socks, done = D.parse_messages(data, 3)
    assert not done
    assert socks == [
        dict(family='tcp', address='0.0.0.0', port=28005, remote_address='0.0.0.0', remote_port=0,
             state='LISTEN', inode=77, uid=1000),
        dict(family='tcp6', address='::1', port=28003, remote_address='::1', remote_port=40000,
             state='ESTABLISHED', inode=78, uid=0),
        dict(family='tcp6', address='10.0.30.10', port=28004, remote_address='::', remote_port=0,
             state='LISTEN', inode=79, uid=0),
        dict(family='tcp', address='127.0.0.1', port=28006, remote_address='0.0.0.0', remote_port=0,
             state='TIME_WAIT', inode=0, uid=0),
    ]


def test_parse_messages_done_error_and_truncation():
    done = nlmsg(D.NLMSG_DONE, 1, struct.pack('=i', 0))
    assert D.parse_messages(done, 1) == ([], True)
    assert D.parse_messages(nlmsg(D.NLMSG_DONE, 2, b''), 1) == ([], False)
    with pytest.raises(OSError) as e:
        D.parse_messages(nlmsg(D.NLMSG_ERROR, 1, struct.pack('=i', -errno.EPERM) + b'\0' * 16), 1)
    assert e.value.errno == errno.EPERM
    with pytest.raises(OSError):
        D.parse_messages(nlmsg(D.NLMSG_DONE, 1, struct.pack('=i', -errno.EINTR)), 1)
    whole = nlmsg(D.SOCK_DIAG_BY_FAMILY, 1, diag(socket.AF_INET, 10, '0.0.0.0', 28005))
    with pytest.raises(ValueError):
        D.parse_messages(whole[:-8], 1)
    with pytest.raises(ValueError):
        D.parse_messages(nlmsg(D.SOCK_DIAG_BY_FAMILY, 1, b'\0' * 40), 1)


def test_read_tcp_table_falls_back_to_proc(monkeypatch, tmp_path):
    def no_netlink(ports=None):
        raise OSError(errno.EPROTONOSUPPORT, 'Protocol not supported')
    monkeypatch.setattr(D, 'dump_tcp', no_netlink)
    socks, source = D.read_tcp_table(ports=[1])
    assert source == D.SOURCE_PROC and socks == S.read_tcp_sockets(ports=[1])
    monkeypatch.undo()
    # a fixture tree is never answered from the live kernel
    (tmp_path / 'net').mkdir()
    (tmp_path / 'net' / 'tcp').write_text(
        '  sl  local_address rem_address   st\n'
        '   0: %s:6D65 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 42 1 0 100 0 0 10 0\n'
        % S.pack_ip_for_test('10.0.30.10'))
    socks, source = D.read_tcp_table(str(tmp_path), ports=[28005])
    assert source == D.SOURCE_PROC and [(s['address'], s['inode']) for s in socks] == [('10.0.30.10', 42)]


def test_dump_tcp_without_ports_asks_nothing(monkeypatch):
    monkeypatch.setattr(socket, 'socket', None)
    assert D.dump_tcp([]) == []


def _netlink_or_skip(ports):
    try:
        return D.dump_tcp(ports)
    except OSError as e:
        pytest.skip('no NETLINK_SOCK_DIAG here: %s' % e)


def _comparable(socks):
    return sorted((s['family'], s['address'], s['port'], s['remote_address'], s['remote_port'], s['state'],
                   s['inode'], s['uid']) for s in socks)


def test_real_sockets_netlink_agrees_with_proc(free_group):
    ports = free_group(6)
    opened = []

    def listener(family, addr, port):
        s = socket.socket(family, socket.SOCK_STREAM)
        opened.append(s)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((addr, port))
        s.listen(4)
        return s
    listener(socket.AF_INET, '127.0.0.1', ports[0])
    listener(socket.AF_INET, '0.0.0.0', ports[1])
    srv = listener(socket.AF_INET, '127.0.0.2', ports[2])
    opened.append(socket.create_connection(('127.0.0.2', ports[2])))
    opened.append(srv.accept()[0])
    has_v6 = os.path.exists('/proc/net/tcp6')
    if has_v6:
        try:
            listener(socket.AF_INET6, '::1', ports[3])
        except OSError:
            has_v6 = False
    try:
        # the span ports[0]..ports[5] with a gap: ports[4] is asked for, not in the answer
        asked = [p for p in ports if p != ports[4]]
        netlink = _netlink_or_skip(asked)
        proc = S.read_tcp_sockets(ports=asked)
        assert _comparable(netlink) == _comparable(proc)
        got = set((s['address'], s['port'], s['state']) for s in netlink)
        assert set([('127.0.0.1', ports[0], 'LISTEN'), ('0.0.0.0', ports[1], 'LISTEN'),
                    ('127.0.0.2', ports[2], 'LISTEN'), ('127.0.0.2', ports[2], 'ESTABLISHED')]) <= got
        assert (('::1', ports[3], 'LISTEN') in got) is has_v6
        inode = os.fstat(opened[0].fileno()).st_ino
        assert [s['inode'] for s in netlink if s['port'] == ports[0]] == [inode]
        assert D.read_tcp_table(ports=asked)[1] == D.SOURCE_NETLINK
    finally:
        for s in opened:
            s.close()
