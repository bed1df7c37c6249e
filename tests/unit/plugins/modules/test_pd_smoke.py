# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pd_smoke: the same greedy completion to P alone and through the proxy, in one visit; every answer (or none) is a
result the proxy role judges, never a failure of the module."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import smoke
from ansible_collections.vllm_pd.ascend.plugins.modules import pd_smoke as M


class Engine(BaseHTTPRequestHandler):
    seen = []
    answers = {}

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        Engine.seen.append((self.path, body, self.headers.get('Authorization'), self.headers.get('X-Request-Id')))
        status, data = Engine.answers[self.path]
        data = data.encode()
        self.send_response(status)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def engine():
    Engine.seen = []
    srv = ThreadingHTTPServer(('127.0.0.1', 0), Engine)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield 'http://127.0.0.1:%d' % srv.server_address[1]
    srv.shutdown()


def args(url, **kw):
    out = dict(reference_url=url + '/p', proxy_url=url + '/proxy', model='m', prompt='Hello', max_tokens=4)
    out.update(kw)
    return out


def test_both_requests_greedy_the_key_on_both_the_id_through_the_proxy(run_module, engine):
    Engine.answers = {'/p': (200, '{"id": "cmpl-a", "choices": [{"text": " world"}]}'),
                      '/proxy': (200, '{"id": "cmpl-b", "choices": [{"text": " world"}]}')}
    failed, res = run_module(M, args(engine, api_key='sk-x'))
    assert not failed and not res['changed'], res
    (p_path, p_body, p_auth, p_id), (x_path, x_body, x_auth, x_id) = Engine.seen
    assert (p_path, x_path) == ('/p', '/proxy') and p_body == x_body == smoke.body('m', 'Hello', 4)
    assert p_body['temperature'] == 0 and p_auth == x_auth == 'Bearer sk-x'
    assert p_id is None and x_id == res['request_id'] and res['request_id'].startswith('vllm-pd-smoke-')
    assert res['trace'] == 'cmpl-b' and res['reference']['text'] == res['proxy']['text'] == ' world'
    assert res['reference']['status'] == 200


def test_an_error_is_a_status_and_no_answer_is_minus_one_with_its_message(run_module, engine):
    Engine.answers = {'/p': (401, '{"error": "Unauthorized"}'), '/proxy': (200, '')}
    failed, res = run_module(M, args(engine))
    assert not failed, res
    assert Engine.seen[0][2] is None and res['reference']['status'] == 401 and 'Unauthorized' in res['reference']['content']
    assert res['proxy'] == dict(status=200, content='', msg=res['proxy']['msg'], text='')
    assert res['trace'] == res['request_id']    # a proxy answer without an id: the id sent
    failed, res = run_module(M, args('http://127.0.0.1:9', timeout=2))
    assert not failed and res['reference']['status'] == -1 and 'content' not in res['proxy'] and res['proxy']['msg']


def test_text_and_trace_of_odd_answers():
    assert smoke.text_of(None) == smoke.text_of({}) == smoke.text_of({'choices': []}) == ''
    assert smoke.text_of({'choices': [{'text': None}]}) == '' and smoke.text_of({'choices': [{'text': 'a'}]}) == 'a'
    assert smoke.trace_of({'id': ''}, 'sent') == smoke.trace_of(None, 'sent') == 'sent'
    assert smoke.parse('[1]') is None and smoke.parse('not json') is None and smoke.parse('{"id": "x"}') == {'id': 'x'}
    assert smoke.headers('', None) == {'Content-Type': 'application/json'}


def test_check_mode_sends_nothing_and_says_what_it_would_send(run_module, engine):
    """A --check run must not load a serving cluster: nothing is sent, the result names the requests and the body
    (header names only: the key is no_log, and never shown), changed false, sent false."""
    Engine.answers = {}
    failed, res = run_module(M, args(engine, api_key='sk-x', _ansible_check_mode=True))
    assert not failed and not res['changed'] and res['sent'] is False, res
    assert Engine.seen == []
    assert 'check mode' in res['msg'] and engine + '/p' in res['msg'] and engine + '/proxy' in res['msg']
    assert res['would_send']['body'] == smoke.body('m', 'Hello', 4)
    assert res['would_send']['requests'] == [
        dict(url=engine + '/p', headers=['Authorization', 'Content-Type']),
        dict(url=engine + '/proxy', headers=['Authorization', 'Content-Type', smoke.REQUEST_ID_HEADER])]
    assert 'sk-x' not in json.dumps(res) and 'reference' not in res and 'proxy' not in res
    assert res['trace'] == res['request_id']


def test_sent_outside_check_mode(run_module, engine):
    Engine.answers = {'/p': (200, '{"id": "cmpl-a", "choices": [{"text": " w"}]}'),
                      '/proxy': (200, '{"id": "cmpl-b", "choices": [{"text": " w"}]}')}
    failed, res = run_module(M, args(engine))
    assert not failed and res['sent'] is True and len(Engine.seen) == 2 and 'would_send' not in res


def test_the_proxy_role_skips_the_verdict_of_a_smoke_not_sent():
    """roles/proxy/tasks/smoke.yml: the journal read and the assert run only when the smoke was sent; the journal read
    runs in a check run too (read-only) when the smoke task was made to send."""
    import os
    import yaml
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), *['..'] * 4))
    with open(os.path.join(root, 'roles/proxy/tasks/smoke.yml')) as f:
        tasks = yaml.safe_load(f)
    smoke_task, journal, verdict = tasks
    assert 'vllm_pd.ascend.pd_smoke' in smoke_task and 'check_mode' not in smoke_task
    assert journal['when'] == verdict['when'] == '__proxy_smoke_run.sent'
    assert journal['check_mode'] is False and 'check_mode' not in verdict
