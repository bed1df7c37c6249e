# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/engine/files/probe_ready.py against a loopback HTTP server: /health, then /v1/models in the same call."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

import pytest

from conftest import load_script


def load():
    mod = load_script('roles/engine/files/probe_ready.py')
    return mod


@pytest.fixture
def server(http_server):
    answers = {}

    def respond(path, _headers):
        status, body = answers.get(path, (404, '{}'))
        return status, body, {'Content-Type': 'application/json'}

    return answers, http_server(respond)


@pytest.mark.parametrize('models, expected', [
    ((200, json.dumps({'object': 'list', 'data': [{'id': 'm'}]})), 'ready'),
    ((200, json.dumps({'object': 'list', 'data': []})), 'unlisted: GET {base}/v1/models listed no model'),
    ((500, 'boom'), 'unlisted: GET {base}/v1/models answered HTTP 500'),
    ((200, 'not json'), 'unlisted: GET {base}/v1/models listed no model: not json'),
])
def test_ready_only_when_the_model_is_listed(server, models, expected):
    answers, base = server
    answers['/health'] = (200, '')
    answers['/v1/models'] = models
    out = load().main(['probe', 'vllm-pd-test.service', base + '/health', '1', base + '/v1/models'])
    assert out.startswith(expected.format(base=base)), out


def test_without_a_models_url_health_is_enough(server):
    answers, base = server
    answers['/health'] = (200, '')
    assert load().main(['probe', 'vllm-pd-test.service', base + '/health', '1']) == 'ready'
