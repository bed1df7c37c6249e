# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/proxy/files/proxy_member.py against the lab's example-proxy scheduler (its remove isolates a
member while any request is in flight; an add of a listed member does nothing) behind a loopback HTTP
server: leave records an isolated member, join waits until the proxy dropped it, re-adds it and waits
for the admission; prove compares D's text with P's own."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import load_script

member = load_script('roles/proxy/files/proxy_member.py')
example = load_script('lab/standin/examples/load_balance_proxy_server_example.py')

D1, D2, P1 = '10.0.0.2:8200', '10.0.0.3:8200', '10.0.0.1:8100'


@pytest.fixture
def proxy():
    sched = example.Scheduler([('10.0.0.1', 8100)], [('10.0.0.2', 8200), ('10.0.0.3', 8200)])

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
            kind, instances = body['type'], example.parse_instances(body['instances'])
            (sched.add if self.path.endswith('add') else sched.remove)(kind, instances)
            snap = sched.snapshot()
            answer = {'message': '', 'current_prefill_instances': snap['prefill'], 'current_decode_instances': snap['decode']}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield sched, 'http://127.0.0.1:%d' % server.server_address[1]
    server.shutdown()


class Clock:
    def __init__(self, on_sleep):
        self.now, self.on_sleep = 0.0, on_sleep

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        self.on_sleep(self.now)


def test_leave_without_traffic_removes_at_once_and_records_nothing(proxy, tmp_path):
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    assert member.leave(url, 'decode', D1, marker, '42')[0] == 'removed'
    assert sched.snapshot()['decode'] == [D2] and not os.path.exists(marker)


def test_isolated_member_rejoins_only_after_the_proxy_dropped_it(proxy, tmp_path):
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    sched.request_num = 3                       # traffic: remove only isolates
    state, listed = member.leave(url, 'decode', D1, marker, '42')
    assert state == 'isolated' and D1 in listed
    assert json.load(open(marker)) == {'pid': '42', 'isolated': {'decode': [D1]}}

    def listener_pass(now):
        if now >= 5:                            # a quiet moment at a pass of the listener
            sched.request_num = 0
        sched.probe_waiting(lambda host, port: True, 3)

    clock = Clock(listener_pass)
    state, listed = member.join(url, 'decode', D1, marker, '42', 60, clock=clock, sleep=clock.sleep)
    assert state == 'joined' and D1 in listed and D1 not in sched.tainted['decode']
    assert clock.now >= 5 and not os.path.exists(marker)


def test_join_stops_at_the_deadline_while_traffic_keeps_it_isolated(proxy, tmp_path):
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    sched.request_num = 1
    member.leave(url, 'decode', D1, marker, '42')
    clock = Clock(lambda now: sched.probe_waiting(lambda host, port: True, 3))
    assert member.join(url, 'decode', D1, marker, '42', 10, clock=clock, sleep=clock.sleep)[0] == 'isolated'
    # without the record, an add of a listed member would pass for a member of the proxy: the record says otherwise
    assert D1 in sched.tainted['decode']


def test_a_member_never_admitted_is_reported_waiting(proxy, tmp_path):
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    member.leave(url, 'decode', D1, marker, '42')
    clock = Clock(lambda now: sched.probe_waiting(lambda host, port: False, 1000))
    assert member.join(url, 'decode', D1, marker, '42', 5, clock=clock, sleep=clock.sleep)[0] == 'waiting'


def test_a_serving_member_is_a_member_at_once_and_a_record_of_another_proxy_process_is_ignored(proxy, tmp_path):
    url = proxy[1]
    marker = str(tmp_path / 'm.json')
    with open(marker, 'w') as f:
        json.dump({'pid': '7', 'isolated': {'decode': [D1]}}, f)   # a proxy restarted since: no isolation
    assert member.join(url, 'decode', D1, marker, '42', 5)[0] == 'member'


def test_prove_requires_d_text_equal_to_p_alone_with_every_serving_peer(proxy, tmp_path, monkeypatch):
    sched, url = proxy
    sent = []

    def post(target, body, key=''):
        assert key == 'sk-k'  # every request of the proof carries the API key
        sent.append((target, 'kv_transfer_params' in body))
        if target.endswith(':8100') and 'kv_transfer_params' not in body:
            return 200, {'choices': [{'text': ' the answer'}]}
        if target.endswith(':8100'):
            return 200, {'choices': [{'text': ' t'}], 'kv_transfer_params': {'remote_engine_id': 'e'}}
        return 200, {'choices': [{'text': ' the answer' if target.endswith(D1) else '\n\n\n'}]}

    monkeypatch.setattr(member, 'post', post)
    pairs = member.prove(url, 'prefill', P1, str(tmp_path / 'm.json'), '42', {'model': 'm', 'prompt': 'x', 'max_tokens': 4},
                         'sk-k')
    assert [(p['decode'], p['ok']) for p in pairs] == [(D1, True), (D2, False)]
    assert 'differs from P' in pairs[1]['detail']
    # an isolated peer is not proven with (it may be the one restarting)
    sched.request_num = 1
    member.leave(url, 'decode', D2, str(tmp_path / 'm.json'), '42')
    pairs = member.prove(url, 'prefill', P1, str(tmp_path / 'm.json'), '42', {'model': 'm', 'prompt': 'x', 'max_tokens': 4},
                         'sk-k')
    assert [p['decode'] for p in pairs] == [D1]


def test_post_sends_the_key_as_bearer_and_none_without_one(monkeypatch):
    seen = []

    class Answer(object):
        status = 200

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def read(self, *a):
            return b'{}'

    def urlopen(req, timeout):
        seen.append(req.get_header('Authorization'))
        return Answer()

    monkeypatch.setattr(member.urllib.request, 'urlopen', urlopen)
    monkeypatch.setattr(member.json, 'load', lambda r: {})
    member.post('http://127.0.0.1:1', {}, 'sk-k')
    member.post('http://127.0.0.1:1', {})
    assert seen == ['Bearer sk-k', None]
