# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module pd_unit: a start and a wait in one run, what it says when either fails, and check mode."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import socket
import threading
import time

from ansible.module_utils import basic

from ansible_collections.vllm_pd.ascend.plugins.modules import pd_unit as M


def fake_systemd(monkeypatch, state='active', fail=None, journal='one\ntwo\n'):
    calls = []

    def run_command(self, argv, **kwargs):
        calls.append(argv)
        if argv[0] == 'journalctl':
            return 0, journal, ''
        if fail and argv[1] == fail[0]:
            return 1, '', fail[1]
        if argv[1] == 'show':
            return 0, state, ''
        if argv[1] == 'is-enabled':
            return 0, 'enabled', ''
        return 0, '', ''

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    return calls


def test_start_then_ready_in_one_run(run_module, monkeypatch, http_server):
    base = http_server(lambda path, headers: (200, '{"data": [{"id": "m"}]}'))
    calls = fake_systemd(monkeypatch, state='inactive')
    failed, res = run_module(M, dict(name='u.service', host='pd-d1', ready=dict(url=base + '/health',
                                                                                models_url=base + '/v1/models')))
    assert not failed and res['changed'] and res['actions'] == ['start'] and res['answer'] == 'ready'
    assert [c[1] for c in calls] == ['show', 'is-enabled', 'reset-failed', 'start']


def test_check_mode_starts_and_waits_for_nothing(run_module, monkeypatch):
    calls = fake_systemd(monkeypatch, state='inactive')
    failed, res = run_module(M, dict(name='u.service', restart=True, ready=dict(url='http://127.0.0.1:9/health'),
                                     _ansible_check_mode=True))
    assert not failed and res['changed'] and res['actions'] == ['restart'] and 'answer' not in res
    assert [c[1] for c in calls] == ['show', 'is-enabled']


def test_a_refused_start_names_the_guard(run_module, monkeypatch):
    fake_systemd(monkeypatch, state='inactive', fail=('start', 'Job for u.service failed.'),
                 journal='starting\nvllm-pd start guard: refused to start u.service: API port 8200 is held\n')
    failed, res = run_module(M, dict(name='u.service', host='pd-d2'))
    assert failed
    assert res['msg'] == ('u.service on pd-d2 did not start: Unable to start service u.service: Job for u.service '
                          'failed.\nvllm-pd start guard: refused to start u.service: API port 8200 is held')


def test_a_unit_that_dies_while_loading_fails_with_its_last_words(run_module, monkeypatch):
    fake_systemd(monkeypatch, state='failed', journal='loading\nRuntimeError: out of memory\n')
    failed, res = run_module(M, dict(name='u.service', host='pd-p1', start=False,
                                     ready=dict(url='http://127.0.0.1:9/health', timeout=30)))
    assert failed and res['answer'] == 'dead'
    assert res['msg'].startswith('u.service on pd-p1 exited\n(GET http://127.0.0.1:9/health: dead).')
    assert res['msg'].endswith('Last log lines:\nloading\nRuntimeError: out of memory')


class Handover(object):
    """Two units on one loopback port: systemctl disable --now of OLD closes its socket, a start of NEW listens
    again after DELAY seconds; FRONT_STATE is NEW's ActiveState, OLD_ON whether OLD runs."""

    def __init__(self, monkeypatch, port, front_state='inactive', old_on=True, delay=0.2):
        self.calls, self.front_state, self.old_on, self.delay, self.port = [], front_state, old_on, delay, port
        self.old = self.listen() if old_on else None
        self.new, self.closed = None, False
        monkeypatch.setattr(basic.AnsibleModule, 'run_command', lambda module, argv, **kw: self.run(argv))

    def listen(self):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(('127.0.0.1', self.port))
        s.listen(64)
        return s

    def later(self):
        time.sleep(self.delay)
        if not self.closed:  # a test that ended before the delay leaves the port alone
            self.new = self.listen()

    def run(self, argv):
        self.calls.append(' '.join(argv[1:]))
        verb = argv[1]
        if verb in ('is-active', 'is-enabled') and argv[-1] == 'old.service':
            return (0 if self.old_on else 3), '', ''
        if verb == 'show':
            return 0, self.front_state, ''
        if verb == 'is-enabled':
            return 0, 'enabled', ''
        if verb == 'disable':
            self.old.close()
        if verb == 'start':
            threading.Thread(target=self.later, daemon=True).start()
        return 0, '', ''

    def close(self):
        self.closed = True
        for s in (self.old, self.new):
            if s is not None:
                s.close()


def replaces(port, timeout=10):
    return dict(unit='old.service', address='127.0.0.1', port=port, timeout=timeout)


def test_a_start_in_place_of_another_unit_stops_it_just_before_and_measures_the_refused_gap(
        run_module, monkeypatch, free_group):
    port = free_group(1)[0]
    units = Handover(monkeypatch, port)
    try:
        failed, res = run_module(M, dict(name='front.service', host='pd-p60', replaces=replaces(port), _ansible_diff=True))
    finally:
        units.close()
    assert not failed, res.get('msg')
    assert res['replaced'] == 'old.service' and res['changed'] and res['actions'] == ['start']
    stop = units.calls.index('disable --now -- old.service')
    assert units.calls[stop + 1] == 'start -- front.service'
    # the new listener came 0.2 s after the start; the watch began before the stop
    assert 0.15 <= res['port_refused_s'] < 10, res
    assert res['diff']['after'] == 'systemctl disable --now old.service\nsystemctl start front.service\n'


def test_a_replaced_unit_that_does_not_run_is_left_and_a_running_front_only_stops_it(
        run_module, monkeypatch, free_group):
    port = free_group(1)[0]
    units = Handover(monkeypatch, port, old_on=False)
    failed, res = run_module(M, dict(name='front.service', replaces=replaces(port)))
    assert not failed and res['replaced'] == '' and res['port_refused_s'] is None
    assert not any(c.startswith('disable') for c in units.calls)
    units = Handover(monkeypatch, port, front_state='active')
    try:
        failed, res = run_module(M, dict(name='front.service', replaces=replaces(port)))
    finally:
        units.close()
    assert not failed and res['replaced'] == 'old.service' and res['changed'] and res['actions'] == []
    assert 'disable --now -- old.service' in units.calls and res['port_refused_s'] is None


def test_a_port_that_does_not_accept_again_fails_naming_both_units(run_module, monkeypatch, free_group):
    port = free_group(1)[0]
    units = Handover(monkeypatch, port, delay=30)
    try:
        failed, res = run_module(M, dict(name='front.service', host='pd-p60', replaces=replaces(port, timeout=1)))
    finally:
        units.close()
    assert failed and res['replaced'] == 'old.service'
    assert res['msg'].startswith('front.service on pd-p60 started in place of old.service, but 127.0.0.1:%d did not '
                                 'accept connections again within 1 s.' % port)


def test_check_mode_says_what_it_would_replace(run_module, monkeypatch, free_group):
    port = free_group(1)[0]
    units = Handover(monkeypatch, port)
    try:
        failed, res = run_module(M, dict(name='front.service', replaces=replaces(port), _ansible_check_mode=True))
    finally:
        units.close()
    assert not failed and res['replaced'] == 'old.service' and res['changed'] and res['port_refused_s'] is None
    assert not any(c.startswith(('disable', 'start')) for c in units.calls)


def test_a_proxy_process_is_ready_only_once_it_counts_its_members(run_module, monkeypatch, http_server):
    base = http_server(lambda path, headers: (200, '{"status": "ok", "prefill_instances": 1, "decode_instances": 1}'))
    fake_systemd(monkeypatch)
    ready = dict(url=base + '/healthcheck', timeout=1)
    failed, res = run_module(M, dict(name='p@1.service', host='pd-p60', start=False,
                                     ready=dict(ready, counts={'prefill_instances': 1, 'decode_instances': 1})))
    assert not failed and res['answer'] == 'ready'
    failed, res = run_module(M, dict(name='p@1.service', host='pd-p60', start=False,
                                     ready=dict(ready, counts={'prefill_instances': 1, 'decode_instances': 2})))
    assert failed and res['answer'] == 'members: decode_instances 1, wanted 2'
    assert res['msg'].startswith('p@1.service on pd-p60 answers but did not count the wanted members within 1 s')
