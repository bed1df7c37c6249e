# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The load of one benchmark run, from pd_bench's parameters: the spec both tools read, the load as
it is saved (what makes two runs comparable), and a run of the built-in load generator (loadgen)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen

URL = re.compile(r'^http://(\[[0-9A-Fa-f:.]+\]|[^/:\s\[\]]+):([0-9]{1,5})/?$')
# A fixed prompt: the built-in generator has no tokenizer, so its input length is in words.
WORDS = ('the', 'cache', 'moved', 'from', 'prefill', 'to', 'decode', 'over', 'the', 'network')


def split_url(url):
    """(host, port) of http://HOST:PORT, or None."""
    m = URL.match(url or '')
    if not m or not 0 < int(m.group(2)) < 65536:
        return None
    return m.group(1).strip('[]'), int(m.group(2))


def prompt_of(words):
    return ' '.join(WORDS[i % len(WORDS)] for i in range(words))


def spec_of(p):
    """What both tools need, from the module's parameters."""
    host, port = split_url(p['url'])
    return dict(url=p['url'].rstrip('/'), host=host, port=port, endpoint=p['endpoint'], model=p['model'],
                served_model_name=p['served_model_name'], input_len=p['input_len'], output_len=p['output_len'],
                count=p['count'], rate=p['rate'] or None, concurrency=p['concurrency'] or None,
                timeout=p['timeout'], seed=p['seed'])


def load_of(p):
    """The load as saved with the run; two runs compare only when these are equal (bench_gate.LOAD_KEYS)."""
    return dict(model=p['served_model_name'] or p['model'], input_len=p['input_len'], output_len=p['output_len'],
                count=p['count'], rate=p['rate'] or None, concurrency=p['concurrency'] or None,
                endpoint=p['endpoint'], warmup=p.get('warmup', 0), tool=p['tool'])


def run_builtin(spec, count, api_key=''):
    """COUNT requests of SPEC through the built-in generator (each with API_KEY as Bearer token when given);
    its result without the per-request samples (the saved record keeps the summaries, as vllm bench serve's
    result file does)."""
    result = loadgen.run(loadgen.LoadSpec(
        url=spec['url'], model=spec['served_model_name'] or spec['model'], prompt=prompt_of(spec['input_len']),
        max_tokens=spec['output_len'], rate=spec['rate'], count=count, concurrency=spec['concurrency'],
        timeout=spec['timeout'], stream=True, endpoint=spec['endpoint'], api_key=api_key))
    result.pop('samples', None)
    return result
