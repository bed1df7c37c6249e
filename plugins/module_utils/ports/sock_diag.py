# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TCP sockets from the kernel's NETLINK_SOCK_DIAG (what ss uses), filtered by local port in the kernel.

With 16,000 sockets, /proc/net/tcp{,6} makes the kernel format every one of them as text (45-100 ms);
a sock_diag dump with a port-range filter still walks them all but returns only the sockets of the
group (4-8 ms).
Pure functions build the request and parse the reply into the records of
sockets.parse_proc_net_tcp(); dump_tcp() does the I/O; read_tcp_table() falls back to /proc.
One difference nothing relies on: a half-open connection (SYN_RECV) has uid 0 here, while
/proc shows its listener's uid.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import os
import socket
import struct

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.sockets import (
    TCP_STATES, normalize_ip, read_tcp_sockets,
)

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
INET_DIAG_REQ_BYTECODE = 1
INET_DIAG_BC_S_GE = 2
INET_DIAG_BC_S_LE = 3
# TCP states 1 (ESTABLISHED) to 12 (NEW_SYN_RECV): the sockets /proc/net/tcp lists. Not 13
# (BOUND_INACTIVE, Linux >= 6.8): /proc cannot show those, and both sources must agree.
ALL_TCP_STATES = 0x1ffe

SOURCE_NETLINK = 'sock_diag'
SOURCE_PROC = 'proc'

_NLMSGHDR = struct.Struct('=IHHII')
# inet_diag_req_v2: family, protocol, ext, pad, states, then a zeroed inet_diag_sockid (48 bytes)
_REQ_V2 = struct.Struct('=BBBBI48x')
_RTATTR = struct.Struct('=HH')
_BC_OP = struct.Struct('=BBH')
# inet_diag_msg: family, state, timer, retrans, sport and dport (network order), src, dst,
# interface, cookie, expires, rqueue, wqueue, uid, inode
_DIAG_MSG = struct.Struct('=BBBBHH16s16sI8xIIIII')
_ERRNO = struct.Struct('=i')
_RECV_SIZE = 65536


def _align4(n):
    return (n + 3) & ~3


def port_range_bytecode(lo, hi):
    """inet_diag bytecode accepting lo <= local port <= hi.

    Each comparison is an op followed by an op whose 'no' field holds the port. A true test
    jumps to the next comparison ('yes' = 8 bytes); a false one jumps 4 bytes past the end of
    the program, which the kernel reads as reject. Falling exactly off the end means accept.
    """
    return b''.join((
        _BC_OP.pack(INET_DIAG_BC_S_GE, 8, 16 + 4), _BC_OP.pack(0, 0, lo),
        _BC_OP.pack(INET_DIAG_BC_S_LE, 8, 8 + 4), _BC_OP.pack(0, 0, hi),
    ))


def build_request(family, seq, port_span=None):
    """A SOCK_DIAG_BY_FAMILY dump request for the TCP sockets of family (AF_INET or AF_INET6).

    port_span: (lo, hi) of local ports for the kernel to keep, or None for every socket.
    """
    body = _REQ_V2.pack(family, socket.IPPROTO_TCP, 0, 0, ALL_TCP_STATES)
    if port_span is not None:
        code = port_range_bytecode(port_span[0], port_span[1])
        body += _RTATTR.pack(_RTATTR.size + len(code), INET_DIAG_REQ_BYTECODE) + code
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def parse_diag_msg(payload):
    """One inet_diag_msg -> a record like sockets.parse_proc_net_tcp() returns (None for port 0)."""
    (family, state, _timer, _retrans, sport, dport, src, dst, _ifindex,
     _expires, _rqueue, _wqueue, uid, inode) = _DIAG_MSG.unpack_from(payload)
    port = socket.ntohs(sport)
    if port == 0:
        return None
    size = 4 if family == socket.AF_INET else 16
    return dict(
        family='tcp' if family == socket.AF_INET else 'tcp6',
        address=normalize_ip(socket.inet_ntop(family, src[:size])), port=port,
        remote_address=normalize_ip(socket.inet_ntop(family, dst[:size])), remote_port=socket.ntohs(dport),
        state=TCP_STATES.get('%02X' % state, '%02X' % state), inode=inode, uid=uid)


def parse_messages(data, seq):
    """Parse one recv() of a dump: (records, done).

    Messages of another sequence number are skipped. Raises OSError for an NLMSG_ERROR (or a
    failed NLMSG_DONE) and ValueError for a truncated message.
    """
    out = []
    offset = 0
    while offset + _NLMSGHDR.size <= len(data):
        length, msg_type, _flags, msg_seq, _pid = _NLMSGHDR.unpack_from(data, offset)
        if length < _NLMSGHDR.size or offset + length > len(data):
            raise ValueError('truncated netlink message (%d bytes at offset %d of %d)' % (length, offset, len(data)))
        payload = data[offset + _NLMSGHDR.size:offset + length]
        offset += _align4(length)
        if msg_seq != seq:
            continue
        if msg_type in (NLMSG_ERROR, NLMSG_DONE):
            err = _ERRNO.unpack_from(payload)[0] if len(payload) >= _ERRNO.size else 0
            if err < 0:
                raise OSError(-err, os.strerror(-err))
            if msg_type == NLMSG_DONE:
                return out, True
            continue
        if msg_type == SOCK_DIAG_BY_FAMILY:
            if len(payload) < _DIAG_MSG.size:
                raise ValueError('short inet_diag_msg (%d bytes)' % len(payload))
            rec = parse_diag_msg(payload)
            if rec is not None:
                out.append(rec)
    return out, False


def dump_tcp(ports=None, timeout=5.0):
    """TCP sockets (IPv4 and IPv6) of the caller's network namespace on local ports in ports.

    The kernel filters on the span min(ports)..max(ports); the gaps are dropped here.
    Raises OSError when sock_diag cannot be used (no netlink, EPERM under seccomp, ...).
    """
    if ports is not None and not ports:
        return []
    family = getattr(socket, 'AF_NETLINK', None)
    if family is None:
        raise OSError(errno.EAFNOSUPPORT, 'no AF_NETLINK on this platform')
    port_span = (min(ports), max(ports)) if ports is not None else None
    out = []
    sock = socket.socket(family, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
    try:
        sock.settimeout(timeout)
        for seq, inet in enumerate((socket.AF_INET, socket.AF_INET6), 1):
            sock.send(build_request(inet, seq, port_span))
            done = False
            while not done:
                recs, done = parse_messages(sock.recv(_RECV_SIZE), seq)
                out.extend(recs)
    finally:
        sock.close()
    if ports is not None:
        wanted = set(ports)
        out = [s for s in out if s['port'] in wanted]
    return out


def read_tcp_table(proc_root='/proc', ports=None):
    """(sockets, source): from sock_diag when it works, else from proc_root/net/tcp{,6}.

    A proc_root other than /proc is a fixture tree, which netlink cannot read: /proc files then.
    """
    if proc_root == '/proc':
        try:
            return dump_tcp(ports), SOURCE_NETLINK
        except (OSError, ValueError):
            pass
    return read_tcp_sockets(proc_root, ports=ports), SOURCE_PROC
