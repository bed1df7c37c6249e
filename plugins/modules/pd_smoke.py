#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: pd_smoke
short_description: Send one greedy completion to a prefill instance alone and the same through the proxy
version_added: "1.0.0"
description:
  - Sends the same greedy completion (temperature 0, fixed O(max_tokens)) first to one prefill instance alone,
    the reference text (P computes it end to end, no KV transfer), and then through the proxy, with a request id of
    its own. It returns both answers, their texts and the request id the decode instance saw (the id of the
    proxy's answer, else the id sent).
  - It judges nothing and never fails on an answer. An HTTP error or no answer is a status in the result, C(-1)
    without an answer. The proxy role requires the same non-empty text and the log line of D for that id.
  - One visit for both requests (they were two C(ansible.builtin.uri) tasks, whose arguments held the key).
  - In check mode it sends nothing (a C(--check) run must not load a serving cluster) and returns what it would send;
    a task with C(check_mode=false) sends in a check run too.
options:
  reference_url:
    description: The completions URL of one prefill instance.
    type: str
    required: true
  proxy_url:
    description: The completions URL of the proxy.
    type: str
    required: true
  model:
    description: The served model name.
    type: str
    required: true
  prompt:
    description: The prompt.
    type: str
    required: true
  max_tokens:
    description: Tokens of the completion.
    type: int
    required: true
  api_key:
    description: The engines' API key, sent as C(Authorization Bearer) with both requests; empty for none.
    type: str
    default: ""
  timeout:
    description: Seconds each request may take.
    type: int
    default: 120
attributes:
  check_mode:
    details: Sends nothing in check mode; RV(sent) is false and RV(would_send) names the requests.
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
  - vllm_pd.ascend.attributes.read_only
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Send the smoke prompt to one prefill instance alone and the same through the proxy
  vllm_pd.ascend.pd_smoke:
    reference_url: http://10.0.30.10:8100/v1/completions
    proxy_url: http://10.0.30.10:8000/v1/completions
    model: Qwen3-0.6B
    prompt: Hello
    max_tokens: 16
  register: smoke
"""

RETURN = r"""
sent:
  description: Whether the requests were sent (false in check mode).
  returned: always
  type: bool
  sample: true
msg:
  description: What it did, or in check mode what it would have done.
  returned: always
  type: str
  sample: sent the smoke completion to the prefill instance and through the proxy
would_send:
  description: In check mode, the requests it would send (their URLs and header names) and their body.
  returned: in check mode
  type: dict
  sample:
    body: {model: Qwen3-0.6B, prompt: Hello, max_tokens: 16, temperature: 0, stream: false}
    requests:
      - {url: http://10.0.30.10:8100/v1/completions, headers: [Content-Type]}
      - {url: http://10.0.30.10:8000/v1/completions, headers: [Content-Type, X-Request-Id]}
request_id:
  description: The request id sent through the proxy.
  returned: always
  type: str
  sample: vllm-pd-smoke-4711
trace:
  description: The request id the decode instance saw and logs (the id of the proxy's answer, else RV(request_id)).
  returned: always
  type: str
  sample: cmpl-6f1c0b0e-5d1b-4a52-9a38-0f8f3f1b2a7e
reference:
  description: The answer of the prefill instance alone.
  returned: when sent
  type: dict
  contains:
    status:
      description: Its HTTP status, C(-1) without an answer.
      type: int
    content:
      description: Its body (absent without an answer).
      type: str
    msg:
      description: What happened (the error without an answer).
      type: str
    text:
      description: The text of its first choice (empty without one).
      type: str
  sample: {status: 200, content: '{"id": "cmpl-1", "choices": [{"text": " world"}]}', msg: OK, text: " world"}
proxy:
  description: The answer through the proxy, with the keys of RV(reference).
  returned: when sent
  type: dict
  sample: {status: 200, content: '{"id": "cmpl-2", "choices": [{"text": " world"}]}', msg: OK, text: " world"}
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.urls import fetch_url

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.smoke import body, headers, new_request_id, outcome, parse, trace_of


def argument_spec():
    return dict(
        reference_url=dict(type='str', required=True),
        proxy_url=dict(type='str', required=True),
        model=dict(type='str', required=True),
        prompt=dict(type='str', required=True),
        # a count of tokens, no secret
        max_tokens=dict(type='int', required=True, no_log=False),
        api_key=dict(type='str', default='', no_log=True),
        timeout=dict(type='int', default=120),
    )


def post(module, url, data, request_headers):
    """One POST -> outcome(): an HTTP error or no answer is a status, never a failure."""
    resp, info = fetch_url(module, url, data=json.dumps(data), headers=request_headers, method='POST',
                           timeout=module.params['timeout'])
    # an HTTP error's body is in info (fetch_url read it), an answer's in resp
    content = info.pop('body', None)
    if content is None and resp is not None:
        content = resp.read()
    return outcome(info.get('status', -1), to_text(content or b'', errors='surrogate_or_replace'), info.get('msg', ''))


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    p = module.params
    data = body(p['model'], p['prompt'], p['max_tokens'])
    request_id = new_request_id()
    requests = [(p['reference_url'], headers(p['api_key'])), (p['proxy_url'], headers(p['api_key'], request_id))]
    if module.check_mode:
        # a --check run sends nothing to a serving cluster: what it would send (header names only: no key shown)
        module.exit_json(changed=False, sent=False, request_id=request_id, trace=request_id,
                         would_send=dict(body=data, requests=[dict(url=u, headers=sorted(h)) for u, h in requests]),
                         msg='check mode: sent nothing; would send the smoke completion to %s (P alone) and to %s '
                             '(the proxy)' % (p['reference_url'], p['proxy_url']))
    reference, proxy = [post(module, url, data, h) for url, h in requests]
    module.exit_json(changed=False, sent=True, request_id=request_id,
                     trace=trace_of(parse(proxy.get('content', '')), request_id), reference=reference, proxy=proxy,
                     msg='sent the smoke completion to %s (P alone) and to %s (the proxy)' % (
                         p['reference_url'], p['proxy_url']))


if __name__ == '__main__':
    main()
