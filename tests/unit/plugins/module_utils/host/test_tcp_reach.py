# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tcp_reach over loopback (a closed port answers RST) and over mocked sockets (no route, drops).

Nothing here sends traffic anywhere but 127.0.0.1: unroutable cases are mocked sockets.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import socket
import threading
import time

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import tcp_reach as T
from ansible_collections.vllm_pd.ascend.plugins.modules import tcp_reach as M


@pytest.fixture
def closed_port():
    """A loopback port nothing listens on: bound without listen() for the whole test, so a connect gets RST
    and no other process can take the port meanwhile (released at once it could be anyone's)."""
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    yield s.getsockname()[1]
    s.close()


class FakeSocket(object):
    """connect() raises EXC after DELAY seconds, or succeeds when EXC is None."""

    def __init__(self, exc, delay=0.0):
        self.exc, self.delay, self.closed, self.timeout = exc, delay, False, None

    def settimeout(self, t):
        self.timeout = t

    def connect(self, addr):
        time.sleep(self.delay)
        if self.exc is not None:
            raise self.exc

    def close(self):
        self.closed = True


def test_closed_loopback_port_answers_rst_and_counts_as_routed(closed_port):
    r = T.probe('127.0.0.1', closed_port, timeout=1)
    assert r['result'] == 'refused' and r['routed'] is True
    assert 'ECONNREFUSED' in r['detail']


def test_listening_loopback_port_is_open_and_routed():
    srv = socket.socket()
    srv.bind(('127.0.0.1', 0))
    srv.listen(1)
    try:
        r = T.probe('127.0.0.1', srv.getsockname()[1], timeout=1)
    finally:
        srv.close()
    assert r['result'] == 'open' and r['routed'] is True


@pytest.mark.parametrize('exc,result', [
    (socket.timeout('timed out'), 'timeout'),
    (OSError(errno.EHOSTUNREACH, 'No route to host'), 'unreachable'),
    (OSError(errno.ENETUNREACH, 'Network is unreachable'), 'unreachable'),
    (OSError(errno.ETIMEDOUT, 'Connection timed out'), 'timeout'),
    (OSError(errno.EACCES, 'Permission denied'), 'error'),
])
def test_mocked_failures_are_not_routed(exc, result):
    socks = []

    def make(address):
        socks.append(FakeSocket(exc))
        return socks[-1]
    r = T.probe('10.255.0.1', 28002, timeout=1.5, make_socket=make)
    assert r['result'] == result and r['routed'] is False
    assert socks[0].closed and socks[0].timeout == 1.5
    if result == 'unreachable':
        assert errno.errorcode[exc.errno] in r['detail']


def test_targets_are_probed_in_parallel_within_one_timeout():
    # each connect waits until all eight are connecting at once: probes in series would break the barrier (its
    # timeout), whatever the machine's load, where a wall-clock bound would be a guess
    targets = [dict(host='p%d' % i, address='10.255.0.%d' % i, port=28002) for i in range(1, 9)]
    together = threading.Barrier(len(targets), timeout=30)

    class AllAtOnce(FakeSocket):
        def connect(self, addr):
            together.wait()
            raise socket.timeout()
    out = T.probe_targets(targets, timeout=0.3, make_socket=lambda a: AllAtOnce(None))
    assert [r['host'] for r in out] == ['p%d' % i for i in range(1, 9)]
    assert all(not r['routed'] and r['result'] == 'timeout' for r in out), out
    assert not together.broken


def test_message_names_both_hosts_addresses_and_nics():
    src = dict(host='pd-d9', role='decode', address='192.168.108.32', interface='data0')
    res = dict(host='pd-p9', role='prefill', address='172.30.47.10', interface='mgmt0', port=28002,
               var='vllm_pd_host_ip', result='unreachable', routed=False, seconds=0.01,
               detail='no route (Network is unreachable, ENETUNREACH)')
    msg = T.unreachable_message(src, res, 'lab9')
    for part in ('cluster lab9', 'pd-d9', '192.168.108.32 (on data0)', 'pd-p9', '172.30.47.10 (on mgmt0)',
                 'port 28002', 'ENETUNREACH', 'vllm_pd_host_ip of pd-p9'):
        assert part in msg, (part, msg)
    assert '\n' not in msg


def test_module_passes_on_rst_and_fails_naming_both_sides(run_module, monkeypatch, closed_port):
    src = dict(host='pd-d1', role='decode', address='127.0.0.1', interface='lo')
    ok = dict(host='pd-p1', role='prefill', address='127.0.0.1', interface='lo', port=closed_port)
    failed, res = run_module(M, dict(source=src, targets=[ok], cluster='c1', timeout=1))
    assert not failed and res['results'][0]['result'] == 'refused' and not res['changed']

    real = T.probe

    def probe(address, port, timeout=2.0, make_socket=None):
        if address == '127.0.0.9':
            return real(address, port, timeout, lambda a: FakeSocket(OSError(errno.ENETUNREACH, 'Network is unreachable')))
        return real(address, port, timeout, make_socket)
    monkeypatch.setattr(T, 'probe', probe)
    bad = dict(host='pd-p2', role='prefill', address='127.0.0.9', interface='mgmt0', port=28002)
    failed, res = run_module(M, dict(source=src, targets=[ok, bad], cluster='c1', timeout=1))
    assert failed and len(res['unreachable']) == 1
    assert 'pd-d1' in res['msg'] and '127.0.0.9 (on mgmt0)' in res['msg'] and '127.0.0.1 (on lo)' in res['msg']


@pytest.mark.parametrize('args,text', [
    (dict(timeout=0), 'timeout must be more than 0'),
    (dict(timeout=31), 'timeout must be more than 0'),
    (dict(port=70000), 'port 70000 of host p is not in 1-65535'),
    (dict(port=0), 'port 0 of host p is not in 1-65535'),
    (dict(address=' '), 'host p has an empty address'),
])
def test_module_refuses_bad_parameters_by_name(run_module, args, text):
    t = dict(host='p', address=args.get('address', '127.0.0.1'), port=args.get('port', 1))
    failed, res = run_module(M, dict(source=dict(host='d', address='127.0.0.1'), targets=[t],
                                     timeout=args.get('timeout', 1)))
    assert failed and text in res['msg']
