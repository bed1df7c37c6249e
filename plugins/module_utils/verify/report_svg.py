# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inline SVG charts of the benchmark's and the doctor's pages (no script, font or image from elsewhere):
a distribution as whisker, box and ticks (min..max, p50..p90, p99, mean), an axis, a histogram of samples
(the KV transfers of a P->D pair) or of a Prometheus histogram's buckets. Numbers are written by display(),
the same way the pages write the JSON's numbers.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from html import escape

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


def number(cluster, key, value, tag='td'):
    """A number of the JSON on the page, with the path to it (data-key) for a reader to compare."""
    return '<%s data-cluster="%s" data-key="%s">%s</%s>' % (tag, escape(cluster), escape(key), escape(display(value)), tag)


def scale_x(value, top):
    return LEFT + (WIDTH - LEFT - RIGHT) * (value / top if top else 0.0)


def axis(y, top):
    out = ['<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>' % (LEFT, y, WIDTH - RIGHT, y)]
    for i in range(5):
        v = top * i / 4.0
        out.append('<text x="%.1f" y="%d" font-size="10" text-anchor="middle" fill="#666">%s</text>' % (
            scale_x(v, top), y + 12, display(v)))
    return out


def percentile_row(y, label, s, top, color):
    """One distribution: whisker min..max, box p50..p90, a tick at p99, a diamond at the mean."""
    out = ['<text x="8" y="%d" font-size="12">%s</text>' % (y + 4, escape(label))]
    if not s or s.get('n') in (None, 0) or s.get('p50') is None:
        out.append('<text x="%d" y="%d" font-size="12" fill="#999">no samples</text>' % (LEFT, y + 4))
        return out
    lo = s['min'] if s.get('min') is not None else s['p50']
    hi = s['max'] if s.get('max') is not None else s['p99']
    out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="1.5"/>' % (
        scale_x(lo, top), y, scale_x(hi, top), y, color))
    out.append('<rect x="%.1f" y="%d" width="%.1f" height="14" fill="%s" fill-opacity="0.35" stroke="%s"/>' % (
        scale_x(s['p50'], top), y - 7, max(1.0, scale_x(s['p90'], top) - scale_x(s['p50'], top)), color, color))
    out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="3"/>' % (
        scale_x(s['p99'], top), y - 10, scale_x(s['p99'], top), y + 10, color))
    if s.get('mean') is not None:
        mx = scale_x(s['mean'], top)
        out.append('<path d="M%.1f %d l5 5 l-5 5 l-5 -5 z" fill="#222"/>' % (mx, y - 5))
    out.append('<text x="%.1f" y="%d" font-size="10" fill="#444">p50 %s</text>' % (scale_x(s['p50'], top), y - 10, display(s['p50'])))
    out.append('<text x="%.1f" y="%d" font-size="10" fill="#444">p99 %s</text>' % (scale_x(s['p99'], top) + 4, y + 16, display(s['p99'])))
    return out


def top_of(summaries):
    values = [s.get(k) for s in summaries if s for k in ('max', 'p99') if s.get(k) is not None]
    return max(values) * 1.05 if values and max(values) > 0 else 1.0


def histogram(samples, lo, hi):
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
    top = top_of([p['ms'] for p in pairs] + ([{'max': float(limit)}] if limit is not None else []))
    if limit is not None:
        lx = scale_x(float(limit), top)
        out.append('<line x1="%.1f" y1="8" x2="%.1f" y2="%d" stroke="#c62828" stroke-dasharray="4 3"/>' % (lx, lx, height - 20))
        out.append('<text x="%.1f" y="18" font-size="10" fill="#c62828">bound %s ms</text>' % (lx + 3, display(float(limit))))
    samples = [v for p in pairs for v in p.get('samples') or []]
    lo, hi = (min(samples), max(samples)) if samples else (0.0, 1.0)
    for i, p in enumerate(pairs):
        y = 40 + i * ROW_H * 3
        color = '#c62828' if limit is not None and (p['ms']['p99'] or 0) > float(limit) else '#2e7d32'
        out += percentile_row(y, p['pair'], p['ms'], top, color)
        counts, width = histogram(p.get('samples') or [], lo, hi)
        peak = max(counts) if counts and max(counts) else 1
        for b, c in enumerate(counts):
            if c:
                h = 40.0 * c / peak
                out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.6">'
                           '<title>%s..%s ms: %d</title></rect>' % (
                               scale_x(lo + b * width, top), y + 70 - h, max(1.0, scale_x(lo + (b + 1) * width, top) - scale_x(lo + b * width, top) - 1),
                               h, color, display(lo + b * width), display(lo + (b + 1) * width), c))
        out += axis(y + 74, top)
    out.append('</svg>')
    return '\n'.join(out)


def buckets_svg(rows, label):
    """One latency of several instances on one scale: per row (name, distribution with 'bins' [[lower, upper or
    None, count]], as a Prometheus histogram gives it) the percentiles, then a bar per non-empty bucket."""
    height = 30 + max(1, len(rows)) * ROW_H * 3
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'role="img" aria-label="%s per instance">' % (WIDTH, height, escape(label))]
    edges = [b[1] if b[1] is not None else b[0] for _n, s in rows if s for b in s.get('bins') or []]
    top = max([top_of([s for _n, s in rows if s])] + [e * 1.05 for e in edges if e])
    for i, (name, s) in enumerate(rows):
        y = 30 + i * ROW_H * 3
        out += percentile_row(y, name, s, top, '#6a1b9a')
        bins = (s or {}).get('bins') or []
        peak = max([b[2] for b in bins] + [1])
        for lower, upper, count in bins:
            h = 40.0 * count / peak
            right = upper if upper is not None else top
            out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#6a1b9a" fill-opacity="0.5">'
                       '<title>%s..%s ms: %d</title></rect>' % (
                           scale_x(lower, top), y + 70 - h, max(1.0, scale_x(right, top) - scale_x(lower, top) - 1), h,
                           display(lower), display(upper) if upper is not None else '+Inf', count))
        out += axis(y + 74, top)
    out.append('</svg>')
    return '\n'.join(out)
