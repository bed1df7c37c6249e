# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/engine/files/probe_drained.py against loopback /metrics: a D is drained when it runs and queues
nothing; a P when it is idle and every D later reads no request waiting (for KV)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from conftest import load_script


def load():
    mod = load_script('roles/engine/files/probe_drained.py')
    mod.GRACE, mod.POLL = 0.05, 0.05
    return mod


def metrics(running, waiting):
    labels = 'engine="0",model_name="m"'
    return ('# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\n'
            'vllm:num_requests_running{%s} %s\nvllm:num_requests_waiting{%s} %s\n'
            'vllm:kv_cache_usage_perc{%s} 0.5\n' % (labels, running, labels, waiting, labels))


@pytest.fixture
def server(http_server):
    answers = {}

    def respond(path, _headers):
        seq = answers.get(path)
        if not seq:
            return 404, ''
        return 200, seq.pop(0) if len(seq) > 1 else seq[0]

    return answers, http_server(respond)


def test_gauges_sum_label_sets_and_ignore_other_metrics():
    text = metrics(2, 1) + 'vllm:num_requests_running{engine="1",model_name="m"} 3.0\nvllm:num_requests_waiting 4 1700000000\n'
    assert load().gauges(text) == {'vllm:num_requests_running': 5.0, 'vllm:num_requests_waiting': 5.0}


def test_decode_is_drained_once_nothing_runs_or_waits(server):
    answers, base = server
    answers['/d'] = [metrics(2, 1), metrics(1, 0), metrics(0, 0)]
    assert load().main(['p', 'decode', base + '/d', '5']) == 'drained'


def test_decode_still_busy_at_the_deadline(server):
    answers, base = server
    answers['/d'] = [metrics(1, 0)]
    assert load().main(['p', 'decode', base + '/d', '0.2']).startswith('busy: %s/d' % base)


def test_prefill_waits_until_every_decode_pulled(server):
    answers, base = server
    answers['/p'] = [metrics(0, 0)]
    answers['/d1'] = [metrics(3, 0)]               # running, but nothing waits for KV any more
    answers['/d2'] = [metrics(1, 2), metrics(1, 0)]
    assert load().main(['p', 'prefill', base + '/p', '5', base + '/d1', base + '/d2']) == 'drained'


def test_prefill_busy_while_a_decode_still_waits_for_kv(server):
    answers, base = server
    answers['/p'] = [metrics(0, 0)]
    answers['/d1'] = [metrics(0, 1)]
    out = load().main(['p', 'prefill', base + '/p', '0.3', base + '/d1'])
    assert out.startswith('busy: %s/d1 still waits for KV' % base), out


def test_an_engine_that_does_not_answer_has_nothing_in_flight(server):
    _answers, base = server
    assert load().main(['p', 'decode', base + '/gone', '1']).startswith('gone: ')
