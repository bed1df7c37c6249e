# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one parser of the Prometheus text exposition format (what vLLM serves on /metrics, version 0.0.4).

A sample line is ``NAME[{LABEL="VALUE",...}] VALUE [TIMESTAMP]``: a label value escapes '\\', '"' and a
newline as \\\\, \\" and \\n; VALUE is a Go float (1, 1.5e-3, NaN, +Inf, -Inf); lines starting with '#'
(# HELP, # TYPE) and blank lines are no samples. A counter's ``_created`` series (prometheus_client's
creation time) is a series of its own name, never summed with ``_total``.

parse_samples(TEXT, NAMES) reads only the series NAMES (all when None): a line of such a series that does not
parse is a ValueError naming the line, so a reader never takes a garbled gauge for 0 (the drain, the benchmark's
request count); lines of other series are not read at all. The doctor, the benchmark and the scripts the roles
run on hosts (filter pd_host_script) all read /metrics with it. No I/O and standard library only.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

_NAME = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,?)')
# a Go float: digits with an exponent, or Inf / Infinity / NaN in any case, signed or not
_VALUE = re.compile(r'^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)$', re.IGNORECASE)
_TIMESTAMP = re.compile(r'^-?[0-9]+$')
_CLOSE = re.compile(r'\s*\}')
_UNESCAPE = re.compile(r'\\([\\"n])')


def _unescape(value):
    return _UNESCAPE.sub(lambda m: '\n' if m.group(1) == 'n' else m.group(1), value)


def _labels(line, pos, lineno):
    """({label: value}, position after '}') of the label set that starts after the '{' at POS."""
    labels = {}
    while True:
        close = _CLOSE.match(line, pos)
        if close:
            return labels, close.end()
        m = _LABEL.match(line, pos)
        if not m:
            raise ValueError('line %d of the metrics text has a malformed label set: %r' % (lineno, line[:200]))
        labels[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
        if not m.group(3) and not _CLOSE.match(line, pos):
            raise ValueError('line %d of the metrics text has labels without a comma between them: %r'
                             % (lineno, line[:200]))


def _sample(line, name, pos, lineno):
    labels = {}
    if line[pos:pos + 1] == '{':
        labels, pos = _labels(line, pos + 1, lineno)
    elif not line[pos:pos + 1].isspace():
        raise ValueError('line %d of the metrics text is not a sample of %s: %r' % (lineno, name, line[:200]))
    words = line[pos:].split()
    if '#' in words:
        words = words[:words.index('#')]  # an OpenMetrics exemplar follows the value (and timestamp)
    if not 1 <= len(words) <= 2 or not _VALUE.match(words[0]) or (len(words) == 2 and not _TIMESTAMP.match(words[1])):
        raise ValueError('line %d of the metrics text is not a sample of %s: %r' % (lineno, name, line[:200]))
    return name, labels, float(words[0])


def parse_samples(text, names=None):
    """[(name, {label: value}, float)] of the sample lines of a Prometheus text exposition, in their order.

    NAMES (an iterable of series names) limits the reading to those series; ValueError when a line of a series
    read does not parse (see the module doc)."""
    wanted = None if names is None else frozenset(names)
    out = []
    for lineno, raw in enumerate((text or '').splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith('#'):
            continue
        m = _NAME.match(line)
        name = m.group() if m else None
        if wanted is not None and name not in wanted:
            continue
        if name is None:
            raise ValueError('line %d of the metrics text is not a sample: %r' % (lineno, line[:200]))
        out.append(_sample(line, name, m.end(), lineno))
    return out


def totals(text, names):
    """{name: the sum of its samples over every label set (0.0 when absent)} for each of NAMES."""
    out = dict((name, 0.0) for name in names)
    for name, _labels, value in parse_samples(text, names):
        out[name] += value
    return out
