# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""front_server: drain a process of the proxy tier in HAProxy until HAProxy counts 0 requests on it, or set it ready
until HAProxy has it UP; nothing when HAProxy is not running or has no such server."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import shutil
import socket
import tempfile
import threading

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import front_server as F

SERVER = proxy_front.processes_plan(18001, 2)[0]['server']
STAT_HEAD = '# pxname,svname,qcur,qmax,scur,smax,slim,stot,status'
STATE_HEAD = '1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight'


class FakeHaproxy:
    """HAProxy's runtime API for BACKEND with proxy1 and proxy2: scur of proxy1 falls by one per `show stat` from
    IN_FLIGHT (the requests it finishes), its status follows its admin state."""

    def __init__(self, in_flight=0, queued=0, status='UP', finishing=True):
        self.admin = {SERVER: 0, 'proxy2': 0}
        self.in_flight, self.queued, self.status, self.finishing = in_flight, queued, status, finishing
        self.sent = []

    def __call__(self, text):
        self.sent.append(text)
        if text == 'show servers state %s' % proxy_front.BACKEND:
            rows = ['1 %s %d %s 127.0.0.1 2 %d 1' % (proxy_front.BACKEND, k, name, admin)
                    for k, (name, admin) in enumerate(sorted(self.admin.items()), 1)]
            return '\n'.join([STATE_HEAD] + rows) + '\n'
        if text == 'show stat':
            status = 'DRAIN' if self.admin[SERVER] & F.FORCED_DRAIN else self.status
            out = '\n'.join([STAT_HEAD, 'front,FRONTEND,,,3,9,,,OPEN',
                             '%s,%s,%d,0,%d,3,,9,%s' % (proxy_front.BACKEND, SERVER, self.queued, self.in_flight, status),
                             '%s,proxy2,0,0,1,3,,9,UP' % proxy_front.BACKEND]) + '\n'
            if self.finishing:
                self.in_flight, self.queued = max(0, self.in_flight - 1), max(0, self.queued - 1)
            return out
        for state, bits in (('drain', F.FORCED_DRAIN), ('ready', 0)):
            if text == F.set_command(proxy_front.BACKEND, SERVER, state):
                self.admin[SERVER] = bits
                return '\n'
        return 'No such server.\n'


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def run(fake, state, **kw):
    clock = Clock()
    return F.run(state, SERVER, command=fake, clock=clock, sleep=clock.sleep, **kw)


def test_the_server_name_is_the_one_the_front_config_lists():
    plan = proxy_front.processes_plan(18001, 2)
    cfg = proxy_front.front_config('10.0.0.1', 8000, 18001, 2, '/healthcheck')
    for p in plan:
        assert '    server %s 127.0.0.1:%d' % (p['server'], p['port']) in cfg.splitlines()


def test_drain_sets_drain_and_waits_until_haproxy_counts_no_request_in_flight_nor_queued():
    fake = FakeHaproxy(in_flight=3, queued=1)
    res = run(fake, 'drain', interval=0.5)
    assert 'failed' not in res and res['changed'] and (res['before'], res['after']) == ('ready', 'drain')
    assert fake.sent[1] == 'set server %s/%s state drain' % (proxy_front.BACKEND, SERVER)
    assert [s['in_flight'] for s in res['seen']] == [3, 2, 1, 0] and res['seen'][-1]['queued'] == 0
    assert res['waited'] == 1.5 and res['status'] == 'DRAIN'


def test_drain_of_an_idle_server_does_not_wait_and_a_drained_one_is_not_changed():
    fake = FakeHaproxy()
    res = run(fake, 'drain')
    assert res['changed'] and res['waited'] == 0 and res['seen'] == [dict(in_flight=0, queued=0)]
    res = run(fake, 'drain')
    assert not res['changed'] and res['before'] == 'drain'
    assert sum(1 for t in fake.sent if t.startswith('set server')) == 1


def test_drain_times_out_naming_the_unit_the_count_and_the_fix_and_gives_the_server_back():
    fake = FakeHaproxy(in_flight=2, finishing=False)
    res = run(fake, 'drain', unit='vllm-pd-proxy@1.service', timeout=3)
    assert res['failed'] and res['waited'] >= 3
    assert 'vllm-pd-proxy@1.service' in res['msg'] and '2 request(s) in flight' in res['msg']
    assert 'proxy_front_drain_timeout' in res['msg'] and 'systemctl restart vllm-pd-proxy@1.service' in res['msg']
    # never left drained: the tier keeps its capacity
    assert fake.sent[-1] == F.set_command(proxy_front.BACKEND, SERVER, 'ready') and fake.admin[SERVER] == 0


def test_ready_sets_ready_and_waits_until_the_health_check_has_it_up():
    fake = FakeHaproxy(status='DOWN')
    fake.admin[SERVER] = F.FORCED_DRAIN
    clock = Clock()

    def sleep(seconds):
        clock.sleep(seconds)
        if clock.now >= 1:
            fake.status = 'UP'
    res = F.run('ready', SERVER, command=fake, clock=clock, sleep=sleep, interval=0.5)
    assert res['changed'] and (res['before'], res['after']) == ('drain', 'ready') and res['status'] == 'UP'
    assert res['waited'] == 1.0 and fake.admin[SERVER] == 0


def test_ready_times_out_with_the_status_and_where_to_look():
    fake = FakeHaproxy(status='DOWN')
    res = run(fake, 'ready', unit='vllm-pd-proxy@1.service', timeout=2)
    assert res['failed'] and 'status DOWN' in res['msg'] and 'journalctl -u vllm-pd-proxy@1.service' in res['msg']


def test_check_mode_reads_and_reports_but_sets_nothing_and_waits_for_nothing():
    fake = FakeHaproxy(in_flight=5)
    res = run(fake, 'drain', check_mode=True)
    assert res['changed'] and res['after'] == 'drain' and res['seen'] == []
    assert fake.sent == ['show servers state %s' % proxy_front.BACKEND]


def test_a_server_not_in_the_running_config_and_a_stopped_haproxy_are_nothing_to_do():
    res = F.run('drain', 'proxy3', command=FakeHaproxy())
    assert res['front'] == 'absent' and not res['changed']

    def down(text):
        raise F.FrontDown('nothing listens')
    res = F.run('drain', SERVER, command=down)
    assert res['front'] == 'down' and not res['changed'] and res['seen'] == []


def test_a_refused_command_fails_with_haproxy_s_answer():
    fake = FakeHaproxy()
    res = F.run('drain', SERVER, command=lambda t: 'Permission denied\n' if t.startswith('set') else fake(t))
    assert res['failed'] and 'Permission denied' in res['msg']


def test_parsers_read_only_their_backend_and_server():
    stat = STAT_HEAD + '\nother,%s,0,0,9,9,,9,UP\n%s,%s,1,0,2,3,,9,UP\n' % (SERVER, proxy_front.BACKEND, SERVER)
    assert F.counts(F.parse_stat(stat, proxy_front.BACKEND, SERVER)) == dict(in_flight=2, queued=1)
    assert F.parse_stat('', proxy_front.BACKEND, SERVER) is None
    state = STATE_HEAD + '\n2 %s 1 %s 127.0.0.1 2 8 1\n' % (proxy_front.BACKEND, SERVER)
    assert F.parse_admin_state(state, proxy_front.BACKEND, SERVER) == 8
    assert F.parse_admin_state(state, proxy_front.BACKEND, 'proxy9') is None
    assert not F.is_up(dict(status='UP 1/2')) and F.is_up(dict(status='UP'))


@pytest.fixture
def admin_socket():
    """A unix socket answering each connection's one command like HAProxy's runtime API, then closing it."""
    tmp = tempfile.mkdtemp(prefix='front', dir='/tmp')  # AF_UNIX paths are short
    path = os.path.join(tmp, 'admin.sock')
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    got = []

    def serve():
        while True:
            try:
                conn = srv.accept()[0]
            except OSError:
                return
            got.append(conn.recv(4096))
            conn.sendall(b'answer\n')
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    yield path, got
    srv.close()
    shutil.rmtree(tmp)


def test_runtime_command_sends_one_line_and_reads_until_haproxy_closes(admin_socket):
    path, got = admin_socket
    assert F.runtime_command(path, 'show stat') == 'answer\n'
    assert got == [b'show stat\n']


def test_runtime_command_says_front_down_when_nothing_listens():
    tmp = tempfile.mkdtemp(prefix='front', dir='/tmp')
    try:
        with pytest.raises(F.FrontDown):
            F.runtime_command(os.path.join(tmp, 'admin.sock'), 'show stat')
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(os.path.join(tmp, 'stale.sock'))  # bound, never listening: what a killed HAProxy leaves
        with pytest.raises(F.FrontDown):
            F.runtime_command(os.path.join(tmp, 'stale.sock'), 'show stat')
        stale.close()
    finally:
        shutil.rmtree(tmp)


def test_the_tier_is_read_per_process_with_its_unit_status_counts_and_last_check():
    head = '# pxname,svname,qcur,scur,status,hrsp_5xx,check_status,last_chk,'
    text = '\n'.join([head, 'front,FRONTEND,,3,OPEN,0,,,',
                      '%s,proxy1,0,2,UP,0,L7OK,HTTP status check returned code <3C>200<3E>,' % proxy_front.BACKEND,
                      '%s,proxy2,1,0,DOWN,4,L4CON,Connection refused,' % proxy_front.BACKEND,
                      '%s,BACKEND,1,2,UP,4,,,' % proxy_front.BACKEND]) + '\n'
    tier = F.read_tier(lambda command: text if command == 'show stat' else '')
    assert tier['front'] == 'running' and tier['error'] is None
    assert tier['processes'] == [
        dict(server='proxy1', unit='vllm-pd-proxy@1.service', status='UP', in_flight=2, queued=0, errors_5xx=0,
             check='L7OK', last_check='HTTP status check returned code <3C>200<3E>'),
        dict(server='proxy2', unit='vllm-pd-proxy@2.service', status='DOWN', in_flight=0, queued=1, errors_5xx=4,
             check='L4CON', last_check='Connection refused')]


def test_a_tier_without_haproxy_or_an_answer_says_so():
    def down(command):
        raise F.FrontDown('nothing listens on /run/vllm-pd-front/admin.sock (ENOENT)')

    def silent(command):
        raise socket.timeout('timed out')
    assert F.read_tier(down) == dict(front='down', processes=[],
                                     error='nothing listens on /run/vllm-pd-front/admin.sock (ENOENT)')
    assert F.read_tier(silent) == dict(front='unreadable', error='TimeoutError: timed out', processes=[])
    assert F.read_tier(lambda command: 'Unknown command.\n')['front'] == 'unreadable'
    assert proxy_front.unit_of_server('proxy12') == 'vllm-pd-proxy@12.service'
    assert proxy_front.unit_of_server('backup') is None and proxy_front.unit_of_server('proxy') is None
