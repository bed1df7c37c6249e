# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's settings as the inventory gives them (vllm_pd_bench_*, vllm_pd_slo_*,
vllm_pd_baseline_tolerance): what each must be, checked with the whole inventory before any request or
change (inventory_rules.rule_benchmark). The gate itself is verify/bench_gate.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

TOOLS = ('auto', 'vllm', 'loadgen')
# variable: (kind, minimum) -- kind int or number; None allowed (unset) where optional
SETTINGS = {
    'vllm_pd_bench_requests': ('int', 1, False),
    'vllm_pd_bench_warmup': ('int', 0, False),
    'vllm_pd_bench_input_len': ('int', 1, False),
    'vllm_pd_bench_output_len': ('int', 2, False),
    'vllm_pd_bench_rate': ('number', 0, True),
    'vllm_pd_bench_concurrency': ('int', 1, True),
    'vllm_pd_bench_timeout': ('number', 0, False),
    'vllm_pd_slo_ttft_ms': ('number', 0, True),
    'vllm_pd_slo_tpot_ms': ('number', 0, True),
    'vllm_pd_slo_kv_transfer_ms': ('number', 0, True),
    'vllm_pd_baseline_tolerance': ('number', 0, False),
}
BOOLS = ('vllm_pd_benchmark', 'vllm_pd_bench_save_baseline')
BOOL_WORDS = ('true', 'false', 'yes', 'no', 'on', 'off', '1', '0')
OTHER_SETTINGS = ('vllm_pd_bench_tool',) + BOOLS
EXAMPLE = {'vllm_pd_bench_requests': '100', 'vllm_pd_bench_warmup': '10', 'vllm_pd_bench_input_len': '128',
           'vllm_pd_bench_output_len': '64', 'vllm_pd_bench_rate': '4.0', 'vllm_pd_bench_concurrency': '8',
           'vllm_pd_bench_timeout': '60', 'vllm_pd_slo_ttft_ms': '2000', 'vllm_pd_slo_tpot_ms': '50',
           'vllm_pd_slo_kv_transfer_ms': '100', 'vllm_pd_baseline_tolerance': '0.97'}


def _number(value, kind):
    """VALUE as an int/float of KIND, or None when it is not one (bools, words, 1.5 for an int)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value) if kind == 'number' or '.' in value else int(value)
        except ValueError:
            return None
    if isinstance(value, float) and kind == 'int':
        return int(value) if value.is_integer() else None
    return value if isinstance(value, (int, float)) else None


def settings_problems(values):
    """(variable, message, fix) for every bad benchmark setting in VALUES ({variable: value}, unset absent)."""
    out = []
    for var in sorted(SETTINGS):
        if var not in values:
            continue
        kind, low, optional = SETTINGS[var]
        raw = values[var]
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            if not optional:
                out.append((var, '%s is empty' % var, 'remove it (default) or set it, e.g. %s: %s' % (var, EXAMPLE[var])))
            continue
        n = _number(raw, kind)
        if n is None or n < low or (kind == 'number' and low == 0 and n == 0):
            what = 'a whole number >= %d' % low if kind == 'int' else 'a number above 0'
            out.append((var, '%s=%r must be %s' % (var, raw, what), 'write it as e.g. %s: %s%s' % (
                var, EXAMPLE[var], ', or leave it unset (not gated)' if var.startswith('vllm_pd_slo_') else '')))
        elif var == 'vllm_pd_baseline_tolerance' and n > 1:
            out.append((var, '%s=%r is above 1: the run would have to beat its baseline' % (var, raw),
                        'use a fraction of the baseline, e.g. %s: 0.97' % var))
    for var in BOOLS:
        # -e NAME=true on the command line is the string 'true': take the words Ansible's bool filter takes
        if var in values and not isinstance(values[var], bool) and str(values[var]).lower() not in BOOL_WORDS:
            out.append((var, '%s=%r is not a boolean' % (var, values[var]), 'write true or false'))
    tool = values.get('vllm_pd_bench_tool')
    if tool is not None and tool not in TOOLS:
        out.append(('vllm_pd_bench_tool', 'vllm_pd_bench_tool=%r is not one of %s' % (tool, ', '.join(TOOLS)),
                    'auto (vllm bench serve where the proxy host has it), vllm or loadgen'))
    rate, conc = values.get('vllm_pd_bench_rate'), values.get('vllm_pd_bench_concurrency')
    if 'vllm_pd_bench_rate' in values and rate in (None, '') and conc in (None, ''):
        out.append(('vllm_pd_bench_rate', 'neither vllm_pd_bench_rate nor vllm_pd_bench_concurrency is set, so the '
                    'load would have no bound', 'set a rate (requests/s) or a concurrency (requests in flight)'))
    return out
