# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The smoke request of the proxy role (module pd_smoke): what it sends and what it reads of the answers.

The same greedy completion goes to one prefill instance alone (the reference: P computes it end to end) and through
the proxy; the role then requires equal, non-empty texts and D's log line for the request id D saw. Both proxies
replace X-Request-Id with a uuid of their own, and D's response id is "cmpl-<that id>", so the id of the proxy's
answer is what D logs; the id sent is only the fallback for a proxy that keeps it."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import random

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.secrets import auth_headers

# what it sends and reads: vLLM's OpenAI completion protocol, the release table's facts (the same in every supported
# release; tests/contract asserts each against every release's source)
_UP = runtime(None)
# the completion request's keys and those read of its answer
REQUEST = _UP['completion_request']
ANSWER = _UP['completion_answer']
# the header vLLM builds its request id from (the proxies send their own in it)
REQUEST_ID_HEADER = _UP['request_id_header']


def new_request_id(rng=random.SystemRandom()):
    """An id of this smoke request, unlike the earlier ones (D's log is searched for it)."""
    return 'vllm-pd-smoke-%d' % rng.randrange(99999999)


def headers(api_key, request_id=None):
    """The request headers: the API key as a bearer token when there is one, the request id when given."""
    out = {'Content-Type': 'application/json'}
    if request_id:
        out[REQUEST_ID_HEADER] = request_id
    out.update(auth_headers(api_key))
    return out


def body(model, prompt, max_tokens):
    """Greedy (temperature 0) with fixed max_tokens, so P alone and P with D must give the same text."""
    return {REQUEST['model']: model, REQUEST['prompt']: prompt, REQUEST['max_tokens']: max_tokens,
            REQUEST['temperature']: 0, REQUEST['stream']: False}


def parse(content):
    """The JSON answer of a completion, or None when it is none (an error page, an empty body)."""
    try:
        answer = json.loads(content)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def text_of(answer):
    """The text of the first choice ('' when the answer has none)."""
    choices = (answer or {}).get(ANSWER['choices'], [{}])
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    return first.get(ANSWER['text'], '') or ''


def trace_of(answer, request_id):
    """The request id D saw: the proxy's answer's id, else the id sent."""
    return (answer or {}).get(ANSWER['id']) or request_id


def outcome(status, content, msg):
    """One request's result as the role reads it (as ansible.builtin.uri's was): status, msg, the text, and content
    only with an answer (status -1: none; the role then shows msg)."""
    out = {'status': status, 'msg': msg, 'text': text_of(parse(content))}
    if status >= 0:
        out['content'] = content
    return out
