# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`vllm bench serve` as the benchmark's load tool: its argv and its result file in the benchmark's form.

Flags differ by release (shared docs observability-bench.md A1): `--backend` must always be given
(its default changed from vllm to openai), without `--host/--port` the tool hits 127.0.0.1:8000,
`p99_*` keys exist only for the percentiles asked for, `failed` only from v0.13. So the argv is built
from the flags the installed release lists in `vllm bench serve --help=all` (plain --help lists only the
group titles since vLLM 0.10), and a flag the gate needs that it lacks makes the tool unusable rather than
silently different.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.loadgen import summary

# the release table's facts of `vllm bench serve` (bench_flags, bench_values, cli_lists_flags: the same in every
# release it knows)
_UP = releases.runtime(None)
_BENCH = _UP['bench_flags']
_VALUES = _UP['bench_values']
_RESULT = _UP['bench_result_keys']

METRICS = _VALUES['percentile_metrics']
# the fields of each latency summary (loadgen.summary's)
KEYS = ('n', 'mean', 'p50', 'p90', 'p99', 'min', 'max')
# The gate reads these; a release without one cannot run the benchmark as asked.
REQUIRED = ('backend', 'host', 'port', 'endpoint', 'model', 'dataset_name', 'random_input_len', 'random_output_len',
            'num_prompts', 'request_rate', 'percentile_metrics', 'metric_percentiles', 'save_result', 'result_dir',
            'result_filename')
REQUIRED_FLAGS = tuple(_BENCH[name] for name in REQUIRED)
FLAG = re.compile(r'(?<![\w-])(--[a-z0-9][a-z0-9-]*)')
# what lists every flag: --help=all (vLLM >= 0.10), else --help (a release that refuses --help=all)
HELP_OPTIONS = (_UP['cli_lists_flags'], '--help')


def help_flags(help_text):
    """The long options a `--help` text lists."""
    return set(FLAG.findall(help_text or ''))


def missing_flags(flags, concurrency=None):
    need = REQUIRED_FLAGS + ((_BENCH['max_concurrency'],) if concurrency else ())
    return [f for f in need if f not in flags]


def argv(binary, spec, flags, result_dir, result_file):
    """argv of `vllm bench serve` for SPEC (host, port, endpoint, model, served_model_name, input_len,
    output_len, count, rate, concurrency, seed) with the FLAGS this release has."""
    f = _BENCH
    out = [binary, 'bench', 'serve', f['backend'], _VALUES['backend'], f['host'], spec['host'], f['port'], str(spec['port']),
           f['endpoint'], spec['endpoint'], f['model'], spec['model'], f['dataset_name'], _VALUES['dataset_name'],
           f['random_input_len'], str(spec['input_len']), f['random_output_len'], str(spec['output_len']),
           f['num_prompts'], str(spec['count']),
           f['request_rate'], 'inf' if not spec.get('rate') else repr(float(spec['rate'])),
           f['percentile_metrics'], ','.join(METRICS),
           f['metric_percentiles'], '50,90,99', f['save_result'], f['result_dir'], result_dir,
           f['result_filename'], result_file]
    if spec.get('concurrency'):
        out += [f['max_concurrency'], str(spec['concurrency'])]
    if spec.get('served_model_name') and f['served_model_name'] in flags:
        out += [f['served_model_name'], spec['served_model_name']]
    # a fixed output length: without it a request may stop at EOS and TPOT means another thing
    if f['ignore_eos'] in flags:
        out.append(f['ignore_eos'])
    if spec.get('seed') is not None and f['seed'] in flags:
        out += [f['seed'], str(spec['seed'])]
    # the per-request lists give min and max
    if f['save_detailed'] in flags:
        out.append(f['save_detailed'])
    if f['disable_tqdm'] in flags:
        out.append(f['disable_tqdm'])
    return out


def _ms(values):
    return [float(v) * 1000.0 for v in values or [] if v is not None]


def _metric(data, name, samples):
    """{n, mean, p50, p90, p99, min, max} of one metric from the result file (ms)."""
    out = dict((k, None) for k in KEYS)
    if samples:
        out.update(summary(samples))
    out['n'] = len(samples) if samples else data.get(_RESULT['completed'])
    for key in ('mean', 'p50', 'p90', 'p99'):
        value = data.get(_RESULT[key] % name)
        if value is None and key == 'p50':
            value = data.get(_RESULT['median'] % name)
        if value is not None:
            out[key] = float(value)
    return out


def _latencies(data):
    """Per-request end-to-end latency (s), aligned with ttfts/output_lens (None for a failed request).

    vLLM's result file has no `latencies` (benchmarks/serve.py, the result dict): a request's latency is the time of
    its last token (lib/endpoint_request_func.py), i.e. its ttft plus the sum of its inter-token gaps (itls)."""
    ttfts, itls, errors = data.get(_RESULT['ttfts']) or [], data.get(_RESULT['itls']) or [], data.get(_RESULT['errors']) or []
    return [ttfts[i] + sum(itls[i] or []) if ttfts[i] and i < len(itls) and not (i < len(errors) and errors[i])
            else None for i in range(len(ttfts))]


def _tpot_samples(data, lat):
    """Per-request TPOT (ms) as vllm computes it: (latency - ttft) / (output tokens - 1)."""
    ttft, outl = data.get(_RESULT['ttfts']) or [], data.get(_RESULT['output_lens']) or []
    return [(lat[i] - ttft[i]) * 1000.0 / (outl[i] - 1) for i in range(min(len(lat), len(ttft), len(outl)))
            if outl[i] and outl[i] > 1 and lat[i] and ttft[i]]


def normalize(data, count):
    """The result file of `vllm bench serve` as the benchmark's result (the load generator's form).
    COUNT: the requests asked for (older releases have no `failed`)."""
    completed = int(data.get(_RESULT['completed']) or 0)
    failed = data.get(_RESULT['failed'])
    failed = int(failed) if failed is not None else max(0, int(count) - completed)
    errors = [str(e) for e in data.get(_RESULT['errors']) or [] if e][:20]
    itls = [x for per_request in data.get(_RESULT['itls']) or [] for x in per_request or []]
    lat = _latencies(data)
    samples = dict(ttft=_ms(data.get(_RESULT['ttfts'])), tpot=_tpot_samples(data, lat), itl=_ms(itls), e2el=_ms(lat))
    out = dict(completed=completed, failed=failed, errors=errors, duration_s=float(data.get(_RESULT['duration']) or 0.0),
               request_throughput=float(data.get(_RESULT['request_throughput']) or 0.0),
               output_throughput=float(data.get(_RESULT['output_throughput']) or 0.0),
               total_output_tokens=int(data.get(_RESULT['total_output_tokens']) or 0))
    for m in METRICS:
        out['%s_ms' % m] = _metric(data, m, samples[m])
    return out
