# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The latency distributions an engine exposes on /metrics (Prometheus text format), for the doctor's page.

vLLM's histograms are cumulative since the engine started: NAME_bucket{le="..."} counts the observations
<= le, NAME_count and NAME_sum all of them. A distribution is estimated from the buckets as Prometheus'
histogram_quantile does (linear within the bucket that holds the rank; the +Inf bucket gives the highest
finite bound). Names per release (shared docs observability-bench.md B4): vllm:time_per_output_token_seconds
was replaced by vllm:inter_token_latency_seconds (deprecated 0.11, removed after 0.12), so either is read.
Values are returned in ms, as the benchmark's latencies.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.prom_text import parse_samples
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime

# The table's metric_names (the same in every release it knows: a name, or a fallback chain newest first).
_NAMES = runtime(None)['metric_names']


def _chain(names):
    return names if isinstance(names, tuple) else (names,)


# (key, label, the names it has had, newest first)
LATENCIES = (
    ('ttft_ms', 'TTFT', _chain(_NAMES['ttft'])),
    ('itl_ms', 'ITL', _chain(_NAMES['itl'])),
    ('e2el_ms', 'E2EL', _chain(_NAMES['e2el'])),
)
QUANTILES = (('p50', 0.5), ('p90', 0.9), ('p99', 0.99))
# the series of the histograms read (common/prom_text.py parses only these; a garbled one is a ValueError)
SERIES = tuple(name + part for _key, _label, names in LATENCIES for name in names for part in ('_bucket', '_count', '_sum'))


def histogram(samples, name):
    """The histogram NAME summed over its series (an engine with several DP ranks has one per rank):
    {'buckets': [(le, cumulative count)] by le with +Inf last, 'count', 'sum'}, or None when it is absent."""
    buckets, count, total, seen = {}, 0.0, 0.0, False
    for sample, labels, value in samples:
        if sample == name + '_bucket' and 'le' in labels:
            le = float('inf') if labels['le'] in ('+Inf', 'Inf') else float(labels['le'])
            buckets[le] = buckets.get(le, 0.0) + value
            seen = True
        elif sample == name + '_count':
            count += value
            seen = True
        elif sample == name + '_sum':
            total += value
    if not seen:
        return None
    return dict(buckets=sorted(buckets.items()), count=count, sum=total)


def quantile(q, buckets):
    """histogram_quantile(q) of cumulative BUCKETS [(le, count)], or None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for le, cumulative in buckets:
        if cumulative >= rank:
            if le == float('inf'):
                return lower
            if cumulative == below:
                return le
            return lower + (le - lower) * (rank - below) / (cumulative - below)
        lower, below = le, cumulative
    return lower


def distribution(hist):
    """A histogram in ms as the pages draw a latency: {n, mean, p50, p90, p99, min, max (None: a histogram
    does not keep them), bins: [[lower ms, upper ms or None for +Inf, count]] of the non-empty buckets}."""
    buckets = hist['buckets']
    n = int(round(hist['count'] or (buckets[-1][1] if buckets else 0)))
    out = dict(n=n, mean=hist['sum'] * 1000.0 / n if n else None, min=None, max=None, bins=[])
    for key, q in QUANTILES:
        v = quantile(q, buckets) if n else None
        out[key] = v * 1000.0 if v is not None else None
    lower, below = 0.0, 0.0
    for le, cumulative in buckets:
        if cumulative > below:
            out['bins'].append([lower * 1000.0, le * 1000.0 if le != float('inf') else None,
                                int(round(cumulative - below))])
        lower, below = le, cumulative
    return out


def latencies(text):
    """{key: {'metric': the name read, ...distribution} or None when the engine exposes none of its names}
    of one engine's /metrics text, for every LATENCIES key. ValueError when a line of these histograms is garbled."""
    samples = parse_samples(text, SERIES)
    out = {}
    for key, _label, names in LATENCIES:
        out[key] = None
        for name in names:
            hist = histogram(samples, name)
            if hist is not None:
                out[key] = dict(distribution(hist), metric=name)
                break
    return out


def metrics_reads(results):
    """Per engine of a host, from the registered results of the doctor's GET /metrics loop (one per engine,
    its item the engine): {kind, unit, url, text (the /metrics text when it answered 200), error (why not)}."""
    out = []
    for r in results:
        ok = r.get('status', -1) == 200
        why = r['msg'] if 'msg' in r else 'status %s' % (r.get('status', '?'),)
        out.append({'kind': r['item']['kind'], 'unit': r['item']['unit'], 'url': r.get('url'),
                    'text': r.get('content', '') if ok else None,
                    'error': None if ok else 'GET /metrics: %s' % (why,)})
    return out
