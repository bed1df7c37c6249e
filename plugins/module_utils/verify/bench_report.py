# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's page: one self-contained HTML file per run (inline SVG and CSS, no script, no font, image
or style from elsewhere: sites are often offline). Per cluster: the gate's verdict and findings, the load,
throughput, the latency distributions (TTFT, TPOT, ITL, E2EL: min, p50, p90, p99, max and mean) and the
KV transfer time per P->D pair (percentiles and a histogram of every transfer).

Every number shown carries ``data-cluster`` and ``data-key`` (a path into the run's JSON record, e.g.
``result.ttft_ms.p99`` or ``kv_transfer.pd-p1 -> pd-d1.ms.p99``) and is the JSON value written with
``display()``, so a reader (the lab test, in a headless browser) can compare the page with the JSON.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from html import escape

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.bench_vllm import KEYS
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.report_svg import (
    ROW_H, WIDTH, axis, display, kv_svg, number, percentile_row, top_of,
)

LATENCIES = (('ttft_ms', 'TTFT'), ('tpot_ms', 'TPOT'), ('itl_ms', 'ITL'), ('e2el_ms', 'E2EL'))
THROUGHPUT = (('completed', 'completed requests'), ('failed', 'failed requests'),
              ('request_throughput', 'requests/s'), ('output_throughput', 'output tokens/s'),
              ('total_output_tokens', 'output tokens'), ('duration_s', 'duration s'))
CSS = ('body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px 0}'
       'td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f0f0f0}'
       'td.l,th.l{text-align:left}.pass{color:#2e7d32}.fail{color:#c62828}.warn{color:#ef6c00}'
       'section{border-top:2px solid #888;margin-top:24px}')


def latency_svg(result):
    """Each latency on its own scale (TTFT and ITL differ by orders of magnitude)."""
    height = ROW_H * (len(LATENCIES) * 2) + 10
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'role="img" aria-label="latency distributions">' % (WIDTH, height)]
    for i, (key, label) in enumerate(LATENCIES):
        s = result.get(key)
        top = top_of([s])
        y = 20 + i * ROW_H * 2
        out += percentile_row(y, '%s (ms)' % label, s, top, '#1565c0')
        out += axis(y + 26, top)
    out.append('</svg>')
    return '\n'.join(out)


def _cluster_section(rec):
    c = rec['cluster']
    res = rec['result']
    verdict = 'PASSED' if rec['passed'] else 'FAILED'
    load = rec['load']
    parts = ['<section data-cluster="%s">' % escape(c),
             '<h2>cluster %s: <span class="%s">%s</span></h2>' % (escape(c), 'pass' if rec['passed'] else 'fail', verdict),
             '<p>%s through the proxy on %s (%s): %s requests (after %s warm-up), input %s, output %s tokens, %s.</p>' % (
                 escape(rec['tool']), escape(rec['proxy']['host']), escape(rec['proxy']['url']), display(load['count']),
                 display(load['warmup']), display(load['input_len']), display(load['output_len']),
                 escape('rate %s req/s' % load['rate'] if load.get('rate') else 'concurrency %s' % load['concurrency']))]
    if rec['findings']:
        parts.append('<ul>')
        for f in rec['findings']:
            parts.append('<li class="%s" data-check="%s">%s%s Fix: %s</li>' % (
                'warn' if f.get('ignored') else 'fail', escape(f['check']), '(ignored) ' if f.get('ignored') else '',
                escape(f['message']), escape(f['fix'])))
        parts.append('</ul>')
    for note in rec.get('notes') or []:
        parts.append('<p class="warn">%s</p>' % escape(note))
    parts.append('<table><tr><th>gate passed</th>%s</tr><tr>%s%s</tr></table>' % (
        ''.join('<th>%s</th>' % escape(label) for _k, label in THROUGHPUT), number(c, 'passed', rec['passed']),
        ''.join(number(c, 'result.' + k, res.get(k)) for k, _label in THROUGHPUT)))
    parts.append('<h3>Latency (ms)</h3><table><tr><th class="l">metric</th>%s</tr>' % ''.join(
        '<th>%s</th>' % k for k in KEYS))
    for key, label in LATENCIES:
        s = res.get(key) or {}
        parts.append('<tr><td class="l">%s</td>%s</tr>' % (label, ''.join(
            number(c, 'result.%s.%s' % (key, k), s.get(k)) for k in KEYS)))
    parts.append('</table>')
    parts.append(latency_svg(res))
    limit = rec['gate'].get('slo_kv_transfer_ms')
    parts.append('<h3>KV transfer per P-&gt;D pair (ms, from the decode logs)</h3>')
    if rec['kv_transfer']:
        parts.append('<table><tr><th class="l">pair</th><th class="l">addresses</th><th>requests</th>%s</tr>' % ''.join(
            '<th>%s</th>' % k for k in KEYS))
        for p in rec['kv_transfer']:
            parts.append('<tr><td class="l">%s</td><td class="l">%s -&gt; %s</td>%s%s</tr>' % (
                escape(p['pair']), escape(p['prefill_address']), escape(p['decode_address']),
                number(c, 'kv_transfer.%s.requests' % p['pair'], p['requests']),
                ''.join(number(c, 'kv_transfer.%s.ms.%s' % (p['pair'], k), p['ms'].get(k)) for k in KEYS)))
        parts.append('</table>')
        parts.append(kv_svg(rec['kv_transfer'], limit))
    else:
        parts.append('<p class="warn">no KV transfer line was logged by a decode engine during the run</p>')
    parts.append('</section>')
    return '\n'.join(parts)


def render_html(run_id, records):
    """The page of one run (RECORDS: one per cluster, as saved in the JSON files)."""
    passed = all(r['passed'] for r in records)
    body = ['<h1>vLLM PD benchmark %s: <span class="%s">%s</span></h1>' % (
        escape(run_id), 'pass' if passed else 'fail', 'PASSED' if passed else 'FAILED')]
    body += [_cluster_section(r) for r in records]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>vLLM PD benchmark %s</title>'
            '<style>%s</style></head><body>\n%s\n</body></html>\n' % (escape(run_id), CSS, '\n'.join(body)))
