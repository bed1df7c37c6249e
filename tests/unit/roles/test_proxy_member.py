# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/proxy/files/proxy_member.py against the real example proxy's scheduler of vllm-ascend 0.23.0.post1
(SharedProxyScheduler, from the sdist scripts/fetch-upstream caches; its FastAPI and httpx imports stubbed:
only the membership state runs) behind a loopback HTTP server that answers as the proxy's routes do: its
remove isolates a member while any request is in flight, an add of a listed member does nothing, and a
remove of a member still waiting to be admitted kills its listener. leave records an isolated member, join
waits until the proxy dropped it, re-adds it and waits for the admission; prove compares D's text with P's own."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys
import tarfile
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import load_script

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

member = load_script('roles/proxy/files/proxy_member.py')

D1, D2, P1 = '10.0.0.2:8200', '10.0.0.3:8200', '10.0.0.1:8100'
RELEASE = '0.23.0.post1'


def _stub(name, **attrs):
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod


class _App:
    def __init__(self, *args, **kwargs):
        pass

    def _route(self, *args, **kwargs):
        return lambda f: f
    post = get = _route


def real_proxy():
    """The 0.23.0.post1 example proxy as a module (its web layer stubbed), or a skip naming the fix."""
    r = subprocess.run([sys.executable, os.path.join(REPO_ROOT, 'scripts', 'fetch-upstream'),
                        'vllm-ascend==' + RELEASE], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        pytest.skip('the vllm-ascend %s sdist is neither cached nor fetchable (scripts/fetch-upstream: %s)' % (RELEASE, r.stderr.strip()))
    sdist = r.stdout.split()[-1]
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split('/')[0]
        code = tar.extractfile(top + '/examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py').read()
    stubs = {'httpx': _stub('httpx', AsyncClient=object, Limits=object, RequestError=Exception, HTTPStatusError=Exception),
             'fastapi': _stub('fastapi', FastAPI=_App, Request=object),
             'fastapi.responses': _stub('fastapi.responses', JSONResponse=object, Response=object, StreamingResponse=object)}
    saved = dict((k, sys.modules.get(k)) for k in stubs)
    sys.modules.update(stubs)
    try:
        mod = types.ModuleType('lb_proxy_%s' % RELEASE.replace('.', '_'))
        exec(compile(code, 'load_balance_proxy_server_example.py', 'exec'), mod.__dict__)  # pylint: disable=exec-used
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mod


@pytest.fixture(scope='module')
def upstream():
    return real_proxy()


def listener_pass(px, sched, probe):
    """One pass of the proxy's NodeListener._run, with PROBE(host, port) for its /v1/models probe."""
    for key, (kind, (host, port), retries) in list(sched.get_waiting_nodes().items()):
        retries += 1
        if probe(host, port):
            sched.activate_waiting_instance(px.ServerRole(kind), host, port)
        elif retries >= 3:
            sched.drop_waiting_instance(key)
        else:
            sched.mark_waiting_retry(key, retries)
    sched.finalize_tainted_instances()


@pytest.fixture
def proxy(upstream, monkeypatch):
    px = upstream
    sched = px.SharedProxyScheduler([('10.0.0.1', 8100)], [('10.0.0.2', 8200), ('10.0.0.3', 8200)])
    busy, served = [], [0]   # served: the members' finished requests in all, one value per read (the last repeats)
    monkeypatch.setattr(member, 'member_work', lambda listed: (list(busy), served.pop(0) if len(served) > 1 else served[0]))

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, data):
            data = json.dumps(data).encode()
            self.send_response(200)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 - http.server's name
            self.answer(sched.healthcheck())

        def do_POST(self):  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
            instances = body['instances'] if isinstance(body['instances'], list) else [body['instances']]
            role, parsed = px.ServerRole(body['type']), px.parse_server_addresses(instances)
            (sched.add_instances if self.path.endswith('add') else sched.remove_instances)(role, parsed)
            snap = sched.get_snapshot()
            self.answer({'message': '',
                         'current_prefill_instances': ['%(host)s:%(port)s' % s for s in snap['prefill_instances']],
                         'current_decode_instances': ['%(host)s:%(port)s' % s for s in snap['decode_instances']]})

    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sched.probe = lambda probe: listener_pass(px, sched, probe)
    sched.busy = busy
    sched.served = served
    sched.decode_tainted = lambda: sched._pool(px.ServerRole.DECODE).tainted
    yield sched, 'http://127.0.0.1:%d' % server.server_address[1]
    server.shutdown()


def decode_listed(sched):
    return ['%(host)s:%(port)s' % s for s in sched.get_snapshot()['decode_instances']]


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
    assert decode_listed(sched) == [D2] and not os.path.exists(marker)


def test_isolated_member_rejoins_only_after_the_proxy_dropped_it(proxy, tmp_path):
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    sched.request_num = 3                       # traffic: remove only isolates
    sched.busy.append(D2)
    state, listed = member.leave(url, 'decode', D1, marker, '42')
    assert state == 'isolated' and D1 in listed
    assert json.load(open(marker)) == {'pid': '42', 'isolated': {'decode': [D1]}}

    def listener_pass(now):
        if now >= 5:                            # a quiet moment at a pass of the listener
            sched.request_num = 0
        sched.probe(lambda host, port: True)

    clock = Clock(listener_pass)
    state, listed = member.join(url, 'decode', D1, marker, '42', 60, clock=clock, sleep=clock.sleep)
    assert state == 'joined' and D1 in listed and '10.0.0.2:8200' not in sched.decode_tainted()
    assert clock.now >= 5 and not os.path.exists(marker)


def test_join_stops_at_the_deadline_while_traffic_keeps_it_isolated(proxy, tmp_path):
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    sched.request_num = 1
    sched.busy.append(D2)
    member.leave(url, 'decode', D1, marker, '42')
    clock = Clock(lambda now: sched.probe(lambda host, port: True))
    assert member.join(url, 'decode', D1, marker, '42', 10, clock=clock, sleep=clock.sleep)[0] == 'isolated'
    # without the record, an add of a listed member would pass for a member of the proxy: the record says otherwise
    assert D1 in sched.decode_tainted()


def test_a_member_never_admitted_is_reported_waiting(proxy, tmp_path, monkeypatch):
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    member.leave(url, 'decode', D1, marker, '42')
    clock = Clock(lambda now: None)   # a pass that never admits nor drops it (a slow listener)
    monkeypatch.setattr(member, 'answers_models', lambda m, pid: False)
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
    sched.busy.append(D1)
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


def test_a_count_left_behind_with_every_member_idle_is_named_leaked_before_any_remove(proxy, tmp_path):
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    sched.request_num = 1                       # a client gone while P computed (0.23): never given back
    slept = []
    assert member.health(url, sleep=slept.append) == ('leaked', 1) and slept == [member.LEAK_GAP] * (member.LEAK_READS - 1)
    state, listed = member.leave(url, 'decode', D1, marker, '42', sleep=slept.append)
    assert state == 'leaked' and D1 in listed and not sched.decode_tainted() and not os.path.exists(marker)
    sched.served[:] = [7, 7, 8]                 # every member idle at each read, but one finished a request meanwhile:
    assert member.health(url, sleep=slept.append)[0] == 'busy'  # traffic in transit between them, not a leak
    sched.served[:] = [8]
    sched.busy.append(D2)                       # a member with work: the count may be real
    assert member.health(url, sleep=slept.append)[0] == 'busy'
    sched.request_num = 0
    assert member.health(url, sleep=slept.append)[0] == 'ok'


def test_join_names_a_leaked_count_instead_of_waiting_out_the_deadline(proxy, tmp_path):
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    sched.request_num = 1
    sched.busy.append(D2)
    assert member.leave(url, 'decode', D1, marker, '42')[0] == 'isolated'
    sched.busy.clear()                          # the traffic ends, the count stays
    clock = Clock(lambda now: sched.probe(lambda host, port: True))
    assert member.join(url, 'decode', D1, marker, '42', 60, clock=clock, sleep=clock.sleep)[0] == 'leaked'
    assert clock.now < 60


def test_a_member_still_waiting_to_be_admitted_is_never_removed_before_it_is_admitted(proxy, tmp_path, upstream):
    """The remove of a waiting member taints a key the proxy does not serve: admitting it then raises KeyError,
    which kills the proxy's listener thread. leave waits for the admission, then removes it."""
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    sched.request_num = 1
    sched.busy.append(P1)
    assert member.leave(url, 'decode', D1, marker, '42')[0] == 'isolated'
    sched.request_num = 0
    sched.probe(lambda host, port: True)        # dropped
    # a join that was interrupted after its add: queued, not listed
    member.set_joining(marker, '42', 'decode', D1, member.time.time())
    member.call(url, 'add', 'decode', D1)
    sched.request_num = 1
    # what the proxy itself does with a remove now (why leave must not send it)
    twin = upstream.SharedProxyScheduler([], [('10.0.0.3', 8200)])
    twin.add_instances(upstream.ServerRole.DECODE, [('10.0.0.2', 8200)])
    twin.request_num = 1
    twin.remove_instances(upstream.ServerRole.DECODE, [('10.0.0.2', 8200)])
    with pytest.raises(KeyError):
        twin.activate_waiting_instance(upstream.ServerRole.DECODE, '10.0.0.2', 8200)
    # leave waits: the listener admits it at its next pass, then it is removed (isolated under traffic)
    ticks = []

    def sleep(seconds):
        ticks.append(seconds)
        sched.probe(lambda host, port: True)
    member.POLL, poll = 0.0, member.POLL
    try:
        assert member.settle(url, 'decode', D1, marker, '42', sleep=sleep) is True
    finally:
        member.POLL = poll
    assert ticks and D1 in decode_listed(sched)
    assert member.leave(url, 'decode', D1, marker, '42')[0] == 'isolated'
    assert 'decode' not in member.read_joining(marker, '42')


def test_an_add_that_untaints_is_joined_at_once(proxy, tmp_path, monkeypatch):
    """0.18.0: /healthcheck has no request_num, and an add of a listed, isolated member un-taints it."""
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    sched.request_num = 1
    sched.busy.append(D2)
    assert member.leave(url, 'decode', D1, marker, '42')[0] == 'isolated'
    assert member.join_step([D1], D1, [D1], untaints=False) == 'isolated'
    assert member.join_step([D1], D1, [D1], untaints=True) == 'joined'
    monkeypatch.setattr(member, 'readd_untaints', lambda url: True)
    assert member.join(url, 'decode', D1, marker, '42', 5)[0] == 'member'
    assert not os.path.exists(marker)


def test_an_added_member_that_answers_but_is_never_admitted_means_a_dead_listener(proxy, tmp_path, monkeypatch):
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    member.leave(url, 'decode', D1, marker, '42')  # idle: removed at once
    clock = Clock(lambda now: None)             # the listener thread is dead: no pass ever comes
    monkeypatch.setattr(member, 'answers_models', lambda m, pid: m == D1)
    assert member.join(url, 'decode', D1, marker, '42', 5, clock=clock, sleep=clock.sleep)[0] == 'listener-dead'


def test_the_release_table_tells_the_readd_from_the_healthcheck_keys():
    """proxy_member.readd_untaints reads the release from /healthcheck: request_num only where an add of a
    listed member is a no-op."""
    from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
    for version, entry in releases.RELEASES.items():
        if entry['status'] == 'supported':
            assert ('request_num' in entry['proxy_healthcheck_keys']) == (entry['proxy_readd'] == 'noop'), version


def test_state_reads_routes_unit_and_members_in_one_visit_and_settles_a_recorded_add_first(proxy, tmp_path, monkeypatch):
    """The proxy role's one read of a re-run: a member a rolling change added and the proxy still has waiting is
    settled (admitted or dropped: settle above) before the lists are read, since a remove of a waiting member kills
    the 0.23 listener."""
    sched, url = proxy
    marker = str(tmp_path / 'm.json')
    monkeypatch.setattr(member, 'active_state', lambda: 'active')
    monkeypatch.setattr(member, 'proxy_pid', lambda: '42')
    monkeypatch.setattr(member, 'routes', lambda url: True)
    member.leave(url, 'decode', D1, marker, '42')    # idle: removed at once
    member.set_joining(marker, '42', 'decode', D1, member.time.time())
    member.call(url, 'add', 'decode', D1)            # queued, not listed
    settled = []
    monkeypatch.setattr(member, 'settle', lambda *args: settled.append(args[1:3]) or sched.probe(lambda host, port: True))
    out = member.proxy_state(url, marker, 'auto', 'no', True)
    assert out['admin'] is True and out['active'] == 'active'
    assert settled == [('decode', D1)] and out['answer']['current_decode_instances'] == [D2, D1]


def test_state_without_a_live_change_or_an_answer_reads_no_members(monkeypatch, capsys):
    monkeypatch.setattr(member, 'active_state', lambda: 'active')
    monkeypatch.setattr(member, 'routes', lambda url: None)     # no proxy answers /openapi.json
    assert member.proxy_state('http://x', '/nonexistent', 'auto', 'yes', False) == {'admin': True, 'active': 'active', 'answer': None}
    assert member.proxy_state('http://x', '/nonexistent', 'auto', 'no', True)['admin'] is False
    assert member.proxy_state('http://x', '/nonexistent', 'no', 'yes', True) == {'admin': False, 'active': 'active', 'answer': None}
    monkeypatch.setattr(member, 'routes', lambda url: False)
    member.main(['state', 'http://x', '/nonexistent', 'auto', 'yes', 'yes'])
    assert json.loads(capsys.readouterr().out) == {'admin': False, 'active': 'active', 'answer': None}


def test_member_work_reads_the_gauges_and_sums_the_finished_requests_of_every_member():
    """Two members' /metrics as vLLM renders them (a counter per finish reason): one idle, one running; a third
    with a garbled gauge is busy (unknown) and adds nothing to the finished count."""
    texts = {'/idle': 'vllm:num_requests_running{engine="0"} 0.0\nvllm:num_requests_waiting{engine="0"} 0.0\n'
                      'vllm:request_success_total{engine="0",finished_reason="length"} 5.0\n'
                      'vllm:request_success_total{engine="0",finished_reason="stop"} 2.0\n',
             '/busy': 'vllm:num_requests_running{engine="0"} 1.0\nvllm:num_requests_waiting{engine="0"} 0.0\n'
                      'vllm:request_success_total{engine="0",finished_reason="length"} 3.0\n',
             '/garbled': 'vllm:num_requests_running{engine="0"} one\n'
                         'vllm:request_success_total{engine="0",finished_reason="length"} 4.0\n'}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802 - http.server's name
            # each member is told apart by a path prefix the engine route follows
            data = texts['/' + self.path.split('/')[1]].encode()
            self.send_response(200)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        here = '127.0.0.1:%d' % server.server_address[1]
        busy, served = member.member_work({'prefill': [here + '/idle'], 'decode': [here + '/busy', here + '/garbled']})
    finally:
        server.shutdown()
    assert busy[0] == here + '/busy' and busy[1].startswith(here + '/garbled (') and len(busy) == 2
    assert served == 10
