# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import socket
import threading
import time

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import zmtp

zmq = pytest.importorskip('zmq')


@pytest.mark.parametrize('data, kind', [
    (b'\xff' + b'\x00' * 7 + b'\x01\x7f', 'zmq'),
    (b'\xff\x00\x00', 'partial'),
    (b'SSH-2.0-OpenSSH_9.2\r\n', 'other'),
    (b'', None),
])
def test_classify_greeting(data, kind):
    assert zmtp.classify_greeting(data) == kind


@pytest.fixture
def zmq_router():
    ctx = zmq.Context()
    socks = []

    def _bind(port, host='127.0.0.1'):
        s = ctx.socket(zmq.ROUTER)
        s.setsockopt(zmq.LINGER, 0)
        s.bind('tcp://%s:%d' % (host, port))
        socks.append(s)
        return s
    yield _bind
    for s in socks:
        s.close(0)
    ctx.term()


class TcpServer(object):
    """A thread serving on 127.0.0.1:port: mode 'http', 'silent', 'banner' or 'close'."""

    def __init__(self, port, mode):
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(('127.0.0.1', port))
        self.srv.listen(16)
        self.mode = mode
        self.stop = False
        self.conns = []
        self.t = threading.Thread(target=self.run)
        self.t.daemon = True
        self.t.start()

    def run(self):
        self.srv.settimeout(0.1)
        while not self.stop:
            try:
                c = self.srv.accept()[0]
            except socket.timeout:
                continue
            except OSError:
                return
            if self.mode == 'close':
                c.close()
                continue
            if self.mode == 'banner':
                c.sendall(b'SSH-2.0-test\r\n')
            if self.mode == 'http':
                c.settimeout(3)
                try:
                    if c.recv(1024).startswith(b'GET'):
                        c.sendall(b'HTTP/1.1 302 Found\r\nLocation: /login\r\nContent-Length: 0\r\n\r\n')
                except OSError:
                    pass
                c.close()
                continue
            self.conns.append(c)

    def close(self):
        self.stop = True
        self.t.join(2)
        self.srv.close()
        for c in self.conns:
            c.close()


def test_probe_kinds(zmq_router, free_group):
    ports = free_group(6)
    zmq_router(ports[0])
    servers = [TcpServer(ports[1], 'http'), TcpServer(ports[2], 'silent'), TcpServer(ports[3], 'banner'),
               TcpServer(ports[4], 'close')]
    try:
        res = zmtp.probe_many('127.0.0.1', ports, timeout=0.5)
    finally:
        for s in servers:
            s.close()
    assert [r['result'] for r in res] == ['zmq', 'http', 'silent', 'other', 'closed', 'refused']
    assert '302' in res[1]['detail']


def test_probe_many_parallel_64(zmq_router, free_group):
    # 16 silent ports of 1 s each: 16 s or more in series, about 1 s in parallel; the bound sits far from both, so
    # a loaded machine does not fail it and probes in series do
    ports = free_group(64)
    for p in ports[:48]:
        zmq_router(p)
    silent = [TcpServer(p, 'silent') for p in ports[48:]]
    try:
        t0 = time.time()
        res = zmtp.probe_many('127.0.0.1', ports, timeout=1.0, http_check=False)
        took = time.time() - t0
    finally:
        for s in silent:
            s.close()
    assert [r['result'] for r in res].count('zmq') == 48
    assert [r['result'] for r in res[48:]] == ['silent'] * 16
    assert took < 8.0, took


def test_probe_empty():
    assert zmtp.probe_many('127.0.0.1', []) == []
