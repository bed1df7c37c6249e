# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ZMTP greeting probe: is a ZeroMQ peer (vLLM-Ascend's KV side channel) on host:port?

A ZMQ socket sends its 10-byte signature (0xFF, 8 bytes, 0x7F) right after the
TCP connect, unsolicited.  An HTTP server sends nothing until it gets a request.
The probe reads the signature and closes; it never sends anything to a ZMQ peer.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import socket
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import params as P

ZMTP_SIGNATURE_LEN = 10


# What each probe() result means for D dialling a port of P, and what to do; shared by
# kv_port_group (state=reachable) and pd_doctor.
REMEDY = dict(
    refused='nothing listens on that port of P: is the prefill engine up, is its VLLM_HOST_IP this address, '
            'are the tp/dp sizes right?',
    timeout='the packets are dropped: check routing and any firewall between D and P',
    unreachable='no route from D: check the address and the data network',
    http='an HTTP service (e.g. Grafana) holds that port of P, not vLLM: run the free preflight on the prefill host',
    silent='a non-ZeroMQ service holds that port of P',
    closed='a non-ZeroMQ service accepts and closes on that port of P',
    other='a non-ZeroMQ protocol answers on that port of P',
    error='connect error',
)


def classify_greeting(data):
    """'zmq' for a ZMTP signature, 'other' for other bytes, None for nothing."""
    if not data:
        return None
    if len(data) >= ZMTP_SIGNATURE_LEN and bytearray(data)[0] == 0xFF and bytearray(data)[9] == 0x7F:
        return 'zmq'
    if len(data) < ZMTP_SIGNATURE_LEN and bytearray(data)[0] == 0xFF:
        return 'partial'
    return 'other'


def _recv_upto(sock, n, deadline):
    buf = b''
    while len(buf) < n:
        left = deadline - time.time()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(n - len(buf))
        except socket.timeout:
            break
        if not chunk:
            return buf, True
        buf += chunk
    return buf, False


def _connect(host, port, timeout):
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect((host, port))
    except Exception:
        sock.close()
        raise
    return sock


def _http_check(host, port, timeout):
    """Send a harmless GET; return the status line if an HTTP server answers."""
    try:
        sock = _connect(host, port, timeout)
    except (socket.error, socket.timeout):
        return None
    try:
        sock.sendall(b'GET / HTTP/1.0\r\nHost: ' + host.encode('ascii', 'replace') + b'\r\n\r\n')
        data, _eof = _recv_upto(sock, 256, time.time() + timeout)
    except (socket.error, socket.timeout):
        data = b''
    finally:
        sock.close()
    if data.startswith(b'HTTP/'):
        return data.split(b'\r\n', 1)[0].decode('ascii', 'replace')
    return None


def bad_argument(host, port, timeout):
    """Text naming the first bad argument of a probe (and the fix), or None."""
    try:
        P.port('port', port)
        P.timeout('timeout', timeout)
        P.ip_address('host', host, 'give the literal IP address of the peer')
    except P.ParamError as e:
        return str(e)
    return None


def probe(host, port, timeout=1.0, http_check=True):
    """Probe one port. Returns {port, result, detail}; a bad argument is result 'error', never an exception.

    result: 'zmq' | 'refused' | 'timeout' | 'unreachable' | 'http' | 'silent'
            | 'closed' | 'other' | 'error'
    """
    res = dict(port=port, host=host)
    bad = bad_argument(host, port, timeout)
    if bad:
        res.update(result='error', detail=bad)
        return res
    host = P.ip_address('host', host, '')
    try:
        sock = _connect(host, port, timeout)
    except socket.timeout:
        res.update(result='timeout', detail='TCP connect timed out after %.1fs (filtered or host down)' % timeout)
        return res
    except socket.error as e:
        code = getattr(e, 'errno', None)
        if code == errno.ECONNREFUSED:
            res.update(result='refused', detail='connection refused (nothing listens)')
        elif code in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL):
            res.update(result='unreachable', detail=str(e))
        else:
            res.update(result='error', detail=str(e))
        return res
    try:
        data, eof = _recv_upto(sock, ZMTP_SIGNATURE_LEN, time.time() + timeout)
    except socket.error as e:
        data, eof = b'', True
        res['detail'] = str(e)
    finally:
        sock.close()
    kind = classify_greeting(data)
    if kind == 'zmq':
        res.update(result='zmq', detail='ZMTP greeting received')
        return res
    if kind in ('other', 'partial'):
        res.update(result='other', detail='non-ZMTP bytes %r' % data[:16])
        return res
    if eof:
        res.update(result='closed', detail='peer accepted and closed without a greeting')
        return res
    status = _http_check(host, port, timeout) if http_check else None
    if status:
        res.update(result='http', detail='HTTP server answered: %s' % status)
    else:
        res.update(result='silent', detail='accepted but sent no ZMTP greeting within %.1fs' % timeout)
    return res


def probe_many(host, ports, timeout=1.0, http_check=True, max_workers=64):
    """Probe ports in parallel; results in the order of ports."""
    ports = list(ports or [])
    if not ports:
        return []
    workers = max(1, min(max_workers, len(ports)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda p: probe(host, p, timeout, http_check), ports))
