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

LATENCIES = (('ttft_ms', 'TTFT'), ('tpot_ms', 'TPOT'), ('itl_ms', 'ITL'), ('e2el_ms', 'E2EL'))
THROUGHPUT = (('completed', 'completed requests'), ('failed', 'failed requests'),
              ('request_throughput', 'requests/s'), ('output_throughput', 'output tokens/s'),
              ('total_output_tokens', 'output tokens'), ('duration_s', 'duration s'))
CSS = ('body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px 0}'
       'td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f0f0f0}'
       'td.l,th.l{text-align:left}.pass{color:#2e7d32}.fail{color:#c62828}.warn{color:#ef6c00}'
       'section{border-top:2px solid #888;margin-top:24px}')
WIDTH, ROW_H, LEFT, RIGHT = 760, 46, 150, 30
BINS = 20


def display(value):
    """How a number of the JSON is written on the page."""
    if value is None:
        return '-'
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return '%d' % value
    return '%.2f' % value


def _num(cluster, key, value, tag='td'):
    return '<%s data-cluster="%s" data-key="%s">%s</%s>' % (tag, escape(cluster), escape(key), display(value), tag)


def _x(value, top):
    return LEFT + (WIDTH - LEFT - RIGHT) * (value / top if top else 0.0)


def _axis(y, top):
    out = ['<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>' % (LEFT, y, WIDTH - RIGHT, y)]
    for i in range(5):
        v = top * i / 4.0
        out.append('<text x="%.1f" y="%d" font-size="10" text-anchor="middle" fill="#666">%s</text>' % (
            _x(v, top), y + 12, display(v)))
    return out


def _percentile_row(y, label, s, top, color):
    """One distribution: whisker min..max, box p50..p90, a tick at p99, a diamond at the mean."""
    out = ['<text x="8" y="%d" font-size="12">%s</text>' % (y + 4, escape(label))]
    if not s or s.get('n') in (None, 0) or s.get('p50') is None:
        out.append('<text x="%d" y="%d" font-size="12" fill="#999">no samples</text>' % (LEFT, y + 4))
        return out
    lo = s['min'] if s.get('min') is not None else s['p50']
    hi = s['max'] if s.get('max') is not None else s['p99']
    out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="1.5"/>' % (
        _x(lo, top), y, _x(hi, top), y, color))
    out.append('<rect x="%.1f" y="%d" width="%.1f" height="14" fill="%s" fill-opacity="0.35" stroke="%s"/>' % (
        _x(s['p50'], top), y - 7, max(1.0, _x(s['p90'], top) - _x(s['p50'], top)), color, color))
    out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="3"/>' % (
        _x(s['p99'], top), y - 10, _x(s['p99'], top), y + 10, color))
    if s.get('mean') is not None:
        mx = _x(s['mean'], top)
        out.append('<path d="M%.1f %d l5 5 l-5 5 l-5 -5 z" fill="#222"/>' % (mx, y - 5))
    out.append('<text x="%.1f" y="%d" font-size="10" fill="#444">p50 %s</text>' % (_x(s['p50'], top), y - 10, display(s['p50'])))
    out.append('<text x="%.1f" y="%d" font-size="10" fill="#444">p99 %s</text>' % (_x(s['p99'], top) + 4, y + 16, display(s['p99'])))
    return out


def _top(summaries):
    values = [s.get(k) for s in summaries if s for k in ('max', 'p99') if s.get(k) is not None]
    return max(values) * 1.05 if values and max(values) > 0 else 1.0


def latency_svg(result):
    """Each latency on its own scale (TTFT and ITL differ by orders of magnitude)."""
    height = ROW_H * (len(LATENCIES) * 2) + 10
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'role="img" aria-label="latency distributions">' % (WIDTH, height)]
    for i, (key, label) in enumerate(LATENCIES):
        s = result.get(key)
        top = _top([s])
        y = 20 + i * ROW_H * 2
        out += _percentile_row(y, '%s (ms)' % label, s, top, '#1565c0')
        out += _axis(y + 26, top)
    out.append('</svg>')
    return '\n'.join(out)


def _histogram(samples, lo, hi):
    counts = [0] * BINS
    width = (hi - lo) / BINS if hi > lo else 1.0
    for v in samples:
        counts[min(BINS - 1, int((v - lo) / width)) if hi > lo else 0] += 1
    return counts, width


def kv_svg(pairs, limit=None):
    """Per P->D pair: percentiles on one common scale, then a histogram of every transfer."""
    height = 40 + len(pairs) * ROW_H * 3
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'role="img" aria-label="KV transfer time per P to D pair">' % (WIDTH, height)]
    top = _top([p['ms'] for p in pairs] + ([{'max': float(limit)}] if limit is not None else []))
    if limit is not None:
        lx = _x(float(limit), top)
        out.append('<line x1="%.1f" y1="8" x2="%.1f" y2="%d" stroke="#c62828" stroke-dasharray="4 3"/>' % (lx, lx, height - 20))
        out.append('<text x="%.1f" y="18" font-size="10" fill="#c62828">bound %s ms</text>' % (lx + 3, display(float(limit))))
    samples = [v for p in pairs for v in p.get('samples') or []]
    lo, hi = (min(samples), max(samples)) if samples else (0.0, 1.0)
    for i, p in enumerate(pairs):
        y = 40 + i * ROW_H * 3
        color = '#c62828' if limit is not None and (p['ms']['p99'] or 0) > float(limit) else '#2e7d32'
        out += _percentile_row(y, p['pair'], p['ms'], top, color)
        counts, width = _histogram(p.get('samples') or [], lo, hi)
        peak = max(counts) if counts and max(counts) else 1
        for b, c in enumerate(counts):
            if c:
                h = 40.0 * c / peak
                out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.6">'
                           '<title>%s..%s ms: %d</title></rect>' % (
                               _x(lo + b * width, top), y + 70 - h, max(1.0, _x(lo + (b + 1) * width, top) - _x(lo + b * width, top) - 1),
                               h, color, display(lo + b * width), display(lo + (b + 1) * width), c))
        out += _axis(y + 74, top)
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
        ''.join('<th>%s</th>' % escape(label) for _k, label in THROUGHPUT), _num(c, 'passed', rec['passed']),
        ''.join(_num(c, 'result.' + k, res.get(k)) for k, _label in THROUGHPUT)))
    parts.append('<h3>Latency (ms)</h3><table><tr><th class="l">metric</th>%s</tr>' % ''.join(
        '<th>%s</th>' % k for k in KEYS))
    for key, label in LATENCIES:
        s = res.get(key) or {}
        parts.append('<tr><td class="l">%s</td>%s</tr>' % (label, ''.join(
            _num(c, 'result.%s.%s' % (key, k), s.get(k)) for k in KEYS)))
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
                _num(c, 'kv_transfer.%s.requests' % p['pair'], p['requests']),
                ''.join(_num(c, 'kv_transfer.%s.ms.%s' % (p['pair'], k), p['ms'].get(k)) for k in KEYS)))
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
