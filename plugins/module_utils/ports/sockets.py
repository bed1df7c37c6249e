# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""/proc/net/tcp{,6} parsing (one read per file) and the Linux TCP bind-conflict rules.

Pure functions: parse_proc_net_tcp(text) -> sockets; blocks_bind(sock, host_ip) -> bool.
The socket table is the one of the network namespace of the reading process.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import socket
import struct
import sys

TCP_STATES = {
    '01': 'ESTABLISHED', '02': 'SYN_SENT', '03': 'SYN_RECV', '04': 'FIN_WAIT1',
    '05': 'FIN_WAIT2', '06': 'TIME_WAIT', '07': 'CLOSE', '08': 'CLOSE_WAIT',
    '09': 'LAST_ACK', '0A': 'LISTEN', '0B': 'CLOSING', '0C': 'NEW_SYN_RECV',
}

# States whose local port stops a new bind() by vLLM's ZMQ (which sets
# SO_REUSEADDR): a listener, a bound-but-not-listening socket (CLOSE with a
# port) and any live connection.  TIME_WAIT does not block SO_REUSEADDR binds.
# SYN_RECV/NEW_SYN_RECV are request socks of a listener that is itself listed.
BLOCKING_STATES = frozenset(['LISTEN', 'CLOSE', 'ESTABLISHED', 'SYN_SENT', 'FIN_WAIT1', 'FIN_WAIT2',
                             'CLOSE_WAIT', 'LAST_ACK', 'CLOSING'])

V4_WILDCARD = '0.0.0.0'
V6_WILDCARD = '::'


def _hex_to_addr(hexaddr, byteorder=None):
    """Decode a /proc/net/tcp address: 32-bit words in host byte order."""
    byteorder = byteorder or sys.byteorder
    raw = bytes(bytearray.fromhex(hexaddr))
    if byteorder == 'little':
        raw = b''.join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw)
    return socket.inet_ntop(socket.AF_INET6, raw)


def normalize_ip(addr):
    """Canonical text form; IPv4-mapped IPv6 (::ffff:a.b.c.d) becomes a.b.c.d."""
    if addr is None:
        return None
    addr = addr.strip()
    if addr.startswith('[') and addr.endswith(']'):
        addr = addr[1:-1]
    if ':' in addr:
        try:
            packed = socket.inet_pton(socket.AF_INET6, addr.split('%', 1)[0])
        except (socket.error, ValueError):
            return addr
        if packed[:12] == b'\x00' * 10 + b'\xff\xff':
            return socket.inet_ntop(socket.AF_INET, packed[12:])
        return socket.inet_ntop(socket.AF_INET6, packed)
    try:
        return socket.inet_ntop(socket.AF_INET, socket.inet_pton(socket.AF_INET, addr))
    except (socket.error, ValueError):
        return addr


def is_v6(addr):
    return ':' in addr


def is_wildcard(addr):
    return addr in (V4_WILDCARD, V6_WILDCARD)


def lines_with_local_port(text, ports):
    """The lines of a /proc/net/tcp{,6} text whose local port is one of ports.

    One regular-expression pass over the whole text instead of splitting every line: with
    16,000 sockets that is 3 ms instead of 120 ms. The local port is the one followed by a
    space and the 8 or 32 hex digits of the remote address (a remote port is followed by the
    2-digit state).
    """
    if not ports:
        return []
    rx = re.compile(r':(?:%s) [0-9A-F]{8}(?:[0-9A-F]{24})?:' % '|'.join('%04X' % p for p in sorted(set(ports))),
                    re.IGNORECASE)
    out = []
    for m in rx.finditer(text):
        end = text.find('\n', m.end())
        out.append(text[text.rfind('\n', 0, m.start()) + 1:end if end >= 0 else len(text)])
    return out


def parse_proc_net_tcp(text, family='tcp', ports=None, byteorder=None):
    """Parse the text of /proc/net/tcp or /proc/net/tcp6.

    ports: optional set of local ports to keep (only those lines are decoded).
    Returns a list of dicts: family, address, port, remote_address,
    remote_port, state, inode, uid.
    """
    out = []
    for line in (text.splitlines() if ports is None else lines_with_local_port(text, ports)):
        fields = line.split()
        if len(fields) < 10 or fields[0] == 'sl':
            continue
        lhex, _sep, lport = fields[1].rpartition(':')
        rhex, _sep, rport = fields[2].rpartition(':')
        try:
            addr = normalize_ip(_hex_to_addr(lhex, byteorder))
            raddr = normalize_ip(_hex_to_addr(rhex, byteorder))
            port = int(lport, 16)
            inode = int(fields[9])
            uid = int(fields[7])
        except (ValueError, socket.error):
            continue
        if port == 0:
            continue
        out.append(dict(
            family=family, address=addr, port=port, remote_address=raddr,
            remote_port=int(rport, 16), state=TCP_STATES.get(fields[3].upper(), fields[3]),
            inode=inode, uid=uid))
    return out


def read_tcp_sockets(proc_root='/proc', ports=None):
    """Read /proc/net/tcp and /proc/net/tcp6 once each."""
    socks = []
    for name in ('tcp', 'tcp6'):
        try:
            with open(os.path.join(proc_root, 'net', name)) as f:
                text = f.read()
        except (IOError, OSError):
            continue
        socks.extend(parse_proc_net_tcp(text, family=name, ports=ports))
    return socks


def addresses_overlap(sock_addr, sock_family, host_ip):
    """Would a socket bound on sock_addr conflict with bind(host_ip, same port)?

    sock_family is 'tcp' or 'tcp6' (the table the socket came from; a tcp6
    socket on a v4-mapped address was normalised to the v4 text).  IPV6_V6ONLY
    is not visible in /proc, so a tcp6 wildcard is taken as dual-stack.
    """
    host_ip = normalize_ip(host_ip)
    sock_addr = normalize_ip(sock_addr)
    host_v6 = is_v6(host_ip)
    if sock_addr == host_ip:
        return True
    if host_ip == V6_WILDCARD:
        # a dual-stack wildcard bind conflicts with everything on the port
        return True
    if host_ip == V4_WILDCARD:
        # v4 wildcard vs every v4 socket, v4-mapped socket and dual-stack ::
        return not is_v6(sock_addr) or sock_addr == V6_WILDCARD
    if sock_addr == V6_WILDCARD:
        # dual-stack wildcard (unless V6ONLY, which we cannot see)
        return True
    if sock_addr == V4_WILDCARD:
        return not host_v6
    return False


def blocks_bind(sock, host_ip):
    """True when sock would make bind(host_ip, sock['port']) fail with EADDRINUSE."""
    if sock['state'] not in BLOCKING_STATES:
        return False
    return addresses_overlap(sock['address'], sock['family'], host_ip)


def classify(socks, ports, host_ip):
    """Split the sockets on the group's ports into blocking and harmless.

    Returns (blocking, misleading): blocking sockets would stop vLLM's bind;
    misleading are LISTEN sockets on the same port but another address (curl
    or nc to that address answers although vLLM is not there).
    """
    want = set(ports)
    blocking, misleading = [], []
    for s in socks:
        if s['port'] not in want:
            continue
        if blocks_bind(s, host_ip):
            blocking.append(s)
        elif s['state'] == 'LISTEN':
            misleading.append(s)
    return blocking, misleading


def listeners_by_port(socks, ports):
    out = dict((p, []) for p in ports)
    for s in socks:
        if s['state'] == 'LISTEN' and s['port'] in out:
            out[s['port']].append(s)
    return out


def format_endpoint(addr, port):
    if is_v6(addr):
        return '[%s]:%d' % (addr, port)
    return '%s:%d' % (addr, port)


def pack_ip_for_test(addr):
    """Encode an address as /proc/net/tcp would on this host (used by tests)."""
    if is_v6(addr):
        raw = socket.inet_pton(socket.AF_INET6, addr)
        words = struct.unpack('=4I', raw)
        return ''.join('%08X' % w for w in words)
    raw = socket.inet_pton(socket.AF_INET, addr)
    return '%08X' % struct.unpack('=I', raw)[0]
