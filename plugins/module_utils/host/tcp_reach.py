# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is a peer's address routed from here? One TCP connect per target, at the TCP level only.

A routed address answers a SYN: with SYN-ACK (something listens) or with RST (closed port,
ECONNREFUSED). Either proves the path, so the port need not be open: the preflight runs before any
engine listens. A timeout, EHOSTUNREACH or ENETUNREACH means no path (wrong address, wrong NIC, a
filter dropping packets). Nothing is sent after the handshake; an accepted connection is closed
at once.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import socket
import time
from concurrent.futures import ThreadPoolExecutor

# result -> routed?
ROUTED = dict(open=True, refused=True, timeout=False, unreachable=False, error=False)

NOT_ROUTED_ERRNOS = (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL)


def classify_error(exc, timeout):
    """(result, detail) of a failed connect: refused (RST), timeout, unreachable or error."""
    if isinstance(exc, socket.timeout):
        return 'timeout', 'no answer within %.1f s (packets dropped or host down)' % timeout
    code = getattr(exc, 'errno', None)
    name = errno.errorcode.get(code, str(code))
    text = getattr(exc, 'strerror', None) or str(exc)
    if code == errno.ECONNREFUSED:
        return 'refused', 'RST: the address answers, the port is closed (%s)' % name
    if code == errno.ETIMEDOUT:
        return 'timeout', 'no answer (%s, %s)' % (text, name)
    if code in NOT_ROUTED_ERRNOS:
        return 'unreachable', 'no route (%s, %s)' % (text, name)
    return 'error', '%s (%s)' % (text, name)


def _socket(address):
    family = socket.AF_INET6 if ':' in address else socket.AF_INET
    return socket.socket(family, socket.SOCK_STREAM)


def probe(address, port, timeout=2.0, make_socket=None):
    """Connect once to ADDRESS:PORT. Returns {address, port, result, routed, detail, seconds}.

    result: open (accepted), refused (RST), timeout, unreachable (no route), error.
    make_socket(address) -> socket is for tests.
    """
    start = time.time()
    res = dict(address=address, port=int(port))
    sock = (make_socket or _socket)(address)
    try:
        sock.settimeout(timeout)
        sock.connect((address, int(port)))
        res.update(result='open', detail='SYN-ACK: something listens there')
    except (socket.error, socket.timeout) as exc:
        res['result'], res['detail'] = classify_error(exc, timeout)
    finally:
        sock.close()
    res['routed'] = ROUTED[res['result']]
    res['seconds'] = round(time.time() - start, 3)
    return res


def probe_targets(targets, timeout=2.0, make_socket=None, max_workers=32):
    """Probe every target ({address, port, ...}) in parallel; each result carries its target's keys.

    The whole call takes about one timeout, whatever the number of targets (up to max_workers).
    """
    targets = list(targets)
    if not targets:
        return []
    workers = max(1, min(max_workers, len(targets)))

    def one(t):
        r = dict(t)
        r.update(probe(t['address'], t['port'], timeout, make_socket))
        return r
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, targets))


def _at(address, nic):
    return '%s (on %s)' % (address, nic) if nic else address


def unreachable_message(source, result, cluster=None):
    """One line for a target that is not routed, naming both hosts, both addresses and their NICs.

    source: {host, role, address, interface}; result: a probe_targets() item whose target had
    {host, role, address, interface, port, var}.
    """
    head = 'cluster %s: ' % cluster if cluster else ''
    return ('%s%s host %s, address %s, cannot reach %s host %s at %s, port %d: %s after %.1f s. '
            'Fix: make %s reach %s (routing, firewall, the data network), or set %s of %s to an address '
            'of %s on the network both hosts share' % (
                head, source.get('role', ''), source['host'], _at(source['address'], source.get('interface')),
                result.get('role', ''), result['host'], _at(result['address'], result.get('interface')),
                result['port'], result['detail'], result['seconds'],
                source['host'], result['address'], result.get('var') or 'vllm_pd_host_ip', result['host'],
                result['host']))
