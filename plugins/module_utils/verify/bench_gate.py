# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark gate: the run record of one cluster, its named findings and the comparison with an
earlier run (its settings: inventory/bench_settings.py). Pure functions; files are read and written by the pd_bench module.

Gate (shared docs observability-bench.md A2, the rule vllm-ascend's own perf tests use): any failed
request; p99 TTFT or TPOT above vllm_pd_slo_ttft_ms / vllm_pd_slo_tpot_ms; output throughput below
the saved baseline x vllm_pd_baseline_tolerance (0.97); a P->D pair whose KV transfer p99 is above
vllm_pd_slo_kv_transfer_ms. An unset SLO is not gated. A baseline counts only for the same load
(tool, model, lengths, count, rate, concurrency): numbers of another shape differ by orders of magnitude.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

RECORD_VERSION = 1
DEFAULT_TOLERANCE = 0.97
# what makes two runs comparable (the baseline is per model, topology and shape)
LOAD_KEYS = ('tool', 'model', 'input_len', 'output_len', 'count', 'rate', 'concurrency', 'endpoint')
GATE_CHECKS = ('BenchRequestsFailed', 'BenchTtftAboveSlo', 'BenchTpotAboveSlo', 'BenchThroughputBelowBaseline',
               'BenchKvTransferSlow', 'BenchKvTransferUnseen')


def _get(record, path):
    value = record
    for part in path.split('.'):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def baseline_usable(record, baseline):
    """(True, '') when BASELINE was measured with RECORD's load, else (False, why)."""
    if not baseline:
        return False, 'no baseline saved (save one with -e vllm_pd_bench_save_baseline=true)'
    diff = ['%s %s -> %s' % (k, baseline['load'].get(k), record['load'].get(k)) for k in LOAD_KEYS
            if baseline.get('load', {}).get(k) != record['load'].get(k)]
    if diff:
        return False, 'baseline %s was measured with another load (%s): not compared' % (
            baseline.get('run_id'), ', '.join(diff))
    return True, ''


def error_text(errors):
    """The errors the tool kept (the first ones), each once with how often it came."""
    counts = {}
    for e in errors or []:
        counts[e] = counts.get(e, 0) + 1
    return '; '.join('%s (%d times)' % (e, n) if n > 1 else e for e, n in sorted(
        counts.items(), key=lambda item: -item[1])) or 'no error text'


def _finding(check, record, message, fix, **extra):
    f = dict(check=check, cluster=record['cluster'], host=record['proxy']['host'], message='[%s] cluster %s: %s' % (
        check, record['cluster'], message), fix=fix)
    f.update(extra)
    return f


def findings(record, baseline, settings):
    """Named findings of one cluster's run. SETTINGS: slo_ttft_ms, slo_tpot_ms, slo_kv_transfer_ms (None: not
    gated), baseline_tolerance, ignore (check names that only warn)."""
    out = []
    res = record['result']
    if res['failed'] > 0:
        out.append(_finding('BenchRequestsFailed', record, '%d of %d requests failed through the proxy on %s: %s' % (
            res['failed'], res['failed'] + res['completed'], record['proxy']['host'], error_text(res.get('errors'))),
            'run playbooks/doctor.yml for the cluster and read the decode engines\' logs',
            value=res['failed'], limit=0))
    for metric, check, var in (('ttft', 'BenchTtftAboveSlo', 'slo_ttft_ms'), ('tpot', 'BenchTpotAboveSlo', 'slo_tpot_ms')):
        limit, p99 = settings.get(var), _get(res, '%s_ms.p99' % metric)
        if limit is not None and p99 is not None and p99 > float(limit):
            out.append(_finding(check, record, 'p99 %s %.2f ms is above vllm_pd_%s %s ms' % (
                metric.upper(), p99, var, limit),
                'find what is slow (doctor.yml, the KV transfer times below) or raise vllm_pd_%s' % var,
                value=p99, limit=float(limit)))
    usable, _why = baseline_usable(record, baseline)
    if usable:
        tol = float(settings.get('baseline_tolerance', DEFAULT_TOLERANCE))
        floor = float(baseline['result']['output_throughput']) * tol
        if res['output_throughput'] < floor:
            out.append(_finding('BenchThroughputBelowBaseline', record, (
                'output throughput %.2f tok/s is below baseline %s %.2f tok/s x vllm_pd_baseline_tolerance %s = %.2f'
                % (res['output_throughput'], baseline['run_id'], baseline['result']['output_throughput'], tol, floor)),
                'compare the KV transfer times and the engines with the baseline run; save a new baseline only '
                'after a deliberate change', value=res['output_throughput'], limit=floor))
    kv_limit = settings.get('slo_kv_transfer_ms')
    if kv_limit is not None:
        for pair in record['kv_transfer']:
            p99 = pair['ms']['p99']
            if p99 is not None and p99 > float(kv_limit):
                message = ('KV transfer %s (%s -> %s): p99 %.2f ms is above vllm_pd_slo_kv_transfer_ms %s ms '
                           '(%d transfers, max %.2f ms)' % (pair['pair'], pair['prefill_address'], pair['decode_address'],
                                                            p99, kv_limit, pair['ms']['n'], pair['ms']['max']))
                fix = ('check the RoCE path between the two hosts (doctor.yml; hccn_tool -i N -ping), the NICs vLLM uses '
                       '(VLLM_HOST_IP, HCCL_IF_IP) and the load on %s' % pair['decode'])
                out.append(_finding('BenchKvTransferSlow', record, message, fix, pair=pair['pair'], value=p99,
                                    limit=float(kv_limit)))
        if res['completed'] > 0:
            for host in record.get('kv_unseen') or []:
                out.append(_finding('BenchKvTransferUnseen', record, (
                    '%s logged no "KV cache transfer for request" line during the run, so the KV transfer bound cannot '
                    'be checked' % host), 'keep the decode engines at log level INFO (VLLM_LOGGING_LEVEL), or unset '
                    'vllm_pd_slo_kv_transfer_ms', host_named=host))
    ignore = settings.get('ignore') or []
    for f in out:
        f['ignored'] = f['check'] in ignore
    return out


def failing(found):
    return [f for f in found if not f.get('ignored')]


ROWS = (('completed', 'completed', '%d'), ('failed', 'failed', '%d'), ('req/s', 'request_throughput', '%.2f'),
        ('out tok/s', 'output_throughput', '%.2f'), ('TTFT p50 ms', 'ttft_ms.p50', '%.2f'),
        ('TTFT p99 ms', 'ttft_ms.p99', '%.2f'), ('TPOT p50 ms', 'tpot_ms.p50', '%.2f'),
        ('TPOT p99 ms', 'tpot_ms.p99', '%.2f'), ('ITL p99 ms', 'itl_ms.p99', '%.2f'),
        ('E2EL p99 ms', 'e2el_ms.p99', '%.2f'))


def _fmt(fmt, value):
    return '-' if value is None else fmt % value


def _change(new, old):
    if new is None or old is None:
        return ''
    if old == 0:
        return '' if new == 0 else 'new'
    return '%+.1f%%' % ((new - old) * 100.0 / old)


def comparison(record, previous):
    """The table printed after a run: this run against the last saved run of the cluster (or alone)."""
    prev_id = previous['run_id'] if previous else 'no earlier run'
    head = '%-30s %16s %16s %9s' % ('cluster %s' % record['cluster'], prev_id[:16], record['run_id'][:16], 'change')
    lines = [head, '-' * len(head)]
    rows = [(label, _get(record['result'], key), _get(previous['result'], key) if previous else None, fmt)
            for label, key, fmt in ROWS]
    old_kv = dict((p['pair'], p['ms']['p99']) for p in (previous or {}).get('kv_transfer') or [])
    rows += [('KV p99 ms %s' % p['pair'], p['ms']['p99'], old_kv.get(p['pair']), '%.2f') for p in record['kv_transfer']]
    for label, new, old, fmt in rows:
        lines.append('%-30s %16s %16s %9s' % (label[:30], _fmt(fmt, old), _fmt(fmt, new), _change(new, old)))
    return lines


def make_record(run_id, cluster, proxy, tool, load, result, kv_transfer, kv_unseen, baseline, settings, notes=()):
    """The JSON record of one cluster's run, with its gate findings (`passed`: none failing)."""
    record = dict(version=RECORD_VERSION, run_id=run_id, cluster=cluster, proxy=proxy, tool=tool, load=load,
                  result=result, kv_transfer=kv_transfer, kv_unseen=list(kv_unseen), notes=list(notes))
    usable, why = baseline_usable(record, baseline)
    record['gate'] = dict(
        slo_ttft_ms=settings.get('slo_ttft_ms'), slo_tpot_ms=settings.get('slo_tpot_ms'),
        slo_kv_transfer_ms=settings.get('slo_kv_transfer_ms'),
        baseline_tolerance=float(settings.get('baseline_tolerance', DEFAULT_TOLERANCE)),
        baseline=dict(run_id=baseline['run_id'], output_throughput=baseline['result']['output_throughput'])
        if usable else None)
    if not usable:
        record['notes'].append(why)
    record['findings'] = findings(record, baseline, settings)
    record['passed'] = not failing(record['findings'])
    return record
