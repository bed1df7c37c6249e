# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Summary statistics of the benchmark, in the form every result of it uses:
{"n", "mean", "p50", "p90", "p99", "min", "max"} (milliseconds for times; None when there is no sample).

Percentiles interpolate linearly between the two nearest ranks, as numpy.percentile does by default,
which is what `vllm bench serve` reports, so the built-in generator's numbers read the same way.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

PERCENTILES = (50, 90, 99)
KEYS = ('n', 'mean', 'p50', 'p90', 'p99', 'min', 'max')


def percentile(ordered, p):
    """The P-th percentile (0..100) of an ascending list, linear between ranks; None when empty."""
    if not ordered:
        return None
    rank = (len(ordered) - 1) * p / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values):
    """The summary of VALUES (numbers); every field but n is None without samples."""
    ordered = sorted(float(v) for v in values)
    out = dict(n=len(ordered), mean=None, min=None, max=None)
    for p in PERCENTILES:
        out['p%d' % p] = percentile(ordered, p)
    if ordered:
        out.update(mean=sum(ordered) / len(ordered), min=ordered[0], max=ordered[-1])
    return out


def empty():
    return summary([])
