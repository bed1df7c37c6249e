# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark gate's pure logic: summaries, KV transfer lines, vllm bench serve's argv and result,
the findings, the comparison table and the page."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import os
import re
from html.parser import HTMLParser

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import check_names, releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import bench_settings
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import bench_gate, bench_kv, bench_report, bench_vllm
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.inventory_rules import inventory_errors

LINE = ('INFO 12-04 15:12:54 [mooncake_connector.py:1020] KV cache transfer for request cmpl-abc-0 took %s ms. '
        'local_ip %s local_device_id %d remote_session_id %s:16462')


def kv_text(ms_values, d_ip='10.0.0.2', p_ip='10.0.0.1'):
    return '\n'.join(LINE % (ms, d_ip, i % 8, p_ip) for i, ms in enumerate(ms_values))


# ------------------------------------------------------------------ KV transfer lines


def test_kv_line_of_vllm_ascend_is_parsed():
    t = bench_kv.parse_line(LINE % ('204.92', '10.0.0.2', 4, '10.0.0.1'))
    assert t == dict(request='cmpl-abc-0', ms=204.92, local_ip='10.0.0.2', device='4', remote_address='10.0.0.1',
                     remote_port='16462')
    assert bench_kv.parse_line('Mooncake transfer failed for request. remote_request_id=x, ret=-1.') is None


def _kv_line(version, ms):
    """The line the Mooncake connector of VERSION logs, formatted from the release table's format string."""
    fmt = releases.RELEASES[version]['kv_log']
    values = ['cmpl-abc-0-1f2e3d4c', ms] + ([3, 17] if '%d groups' in fmt else []) + ['10.0.0.2', 4, '10.0.0.1:16462']
    return 'INFO 12-04 15:12:54 [mooncake_connector.py:973] ' + fmt % tuple(values)


@pytest.mark.parametrize('version', sorted(releases.RELEASES))
def test_the_kv_line_of_every_release_is_parsed(version):
    t = bench_kv.parse_line(_kv_line(version, 12.5))
    assert t == dict(request='cmpl-abc-0-1f2e3d4c', ms=12.5, local_ip='10.0.0.2', device='4',
                     remote_address='10.0.0.1', remote_port='16462')
    pairs = bench_kv.pair_times([{'host': 'd1', 'address': '10.0.0.2', 'text': _kv_line(version, 7.0)}],
                                {'10.0.0.1': 'p1'})
    assert [(p['prefill'], p['decode'], p['samples']) for p in pairs] == [('p1', 'd1', [7.0])]


def test_the_skipping_line_of_0_23_is_no_transfer():
    assert bench_kv.parse_line('WARNING [mooncake_connector.py:717] Skipping KV cache transfer for request. '
                               'remote_request_id=cmpl-abc-0-1f2e3d4c') is None


def test_pairs_join_the_session_address_to_the_prefill_host_and_summarise_each():
    logs = [dict(host='d1', address='10.0.0.2', text=kv_text([10, 20, 30]) + '\n' + kv_text([500], p_ip='10.0.0.9')),
            dict(host='d2', address='10.0.0.3', text=kv_text([5, 5], d_ip='10.0.0.3')),
            dict(host='d3', address='10.0.0.4', text='INFO nothing here')]
    pairs = bench_kv.pair_times(logs, {'10.0.0.1': 'p1'})
    assert [p['pair'] for p in pairs] == ['10.0.0.9 -> d1', 'p1 -> d1', 'p1 -> d2']
    p1d1 = pairs[1]
    assert p1d1['samples'] == [10, 20, 30] and p1d1['ms']['p50'] == 20 and p1d1['ms']['max'] == 30
    assert p1d1['prefill_address'] == '10.0.0.1' and p1d1['decode_address'] == '10.0.0.2'
    assert p1d1['requests'] == 1  # one request id, many ranks
    assert bench_kv.unseen(logs, pairs) == ['d3']


def metrics(*success):
    """A D instance's /metrics as vLLM writes it: one request_success_total series per finished_reason."""
    lines = ['# HELP vllm:request_success_total Count of successfully processed requests.',
             '# TYPE vllm:request_success_total counter',
             'vllm:num_requests_running{engine="0",model_name="m"} 0.0']
    lines += ['vllm:request_success_total{engine="0",finished_reason="%s",model_name="m"} %s' % (reason, n)
              for reason, n in zip(('length', 'stop', 'abort'), success)]
    lines += ['vllm:request_success_created{engine="0",finished_reason="length",model_name="m"} 1.7e9']
    return '\n'.join(lines)


def test_requests_served_sums_every_reason_and_instance_between_the_reads():
    before = [metrics(3.0, 1.0), metrics()]
    after = [metrics(10.0, 2.0), metrics(4.0)]
    assert bench_kv.requests_served(before, after) == 12
    assert bench_kv.requests_served(before, before) == 0


@pytest.mark.parametrize('before, after', [
    ([metrics(1.0)], [None]),                       # a read failed
    ([None], [metrics(1.0)]),
    ([], []),                                       # skipped: no instance read
    ([metrics(1.0)], [metrics(1.0), metrics(1.0)]),  # instance lists differ
    ([metrics(9.0)], [metrics(2.0)]),               # an engine restarted in between
])
def test_requests_served_is_unknown_when_it_cannot_be_told(before, after):
    assert bench_kv.requests_served(before, after) is None


def test_a_d_that_served_nothing_is_idle_not_unseen_and_an_unknown_count_is_unseen():
    logs = [dict(host='d1', address='10.0.0.2', text=kv_text([10]), served=4),
            dict(host='d2', address='10.0.0.3', text='', served=0),
            dict(host='d3', address='10.0.0.4', text='', served=3),
            dict(host='d4', address='10.0.0.5', text='', served=None),
            dict(host='d5', address='10.0.0.6', text='')]
    pairs = bench_kv.pair_times(logs, {'10.0.0.1': 'p1'})
    assert bench_kv.unseen(logs, pairs) == ['d3', 'd4', 'd5']
    assert bench_kv.idle(logs, pairs) == ['d2']
    note = bench_kv.idle_note(['d2'])
    assert note.startswith('d2 finished no request') and 'vllm_pd_bench_concurrency' in note
    assert bench_kv.idle_note([]) is None


# ------------------------------------------------------------------ vllm bench serve

# What vLLM 0.23.0's own argparse code prints for `vllm bench serve --help=all` and `--help` (scripts/vllm-bench-help
# over the vllm-0.23.0 sdist): plain --help lists only the group titles.
FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures')
with open(os.path.join(FIXTURES, 'vllm-0.23.0-bench-serve-help-all.txt')) as _f:
    HELP = _f.read()
with open(os.path.join(FIXTURES, 'vllm-0.23.0-bench-serve-help.txt')) as _f:
    HELP_PLAIN = _f.read()


def without(text, *flags):
    """TEXT without the help entries of FLAGS (an older release's help)."""
    return re.sub(r'(?m)^  (%s)\b.*\n(?:^ {6,}.*\n)*' % '|'.join(re.escape(f) for f in flags), '', text)


SPEC = dict(host='10.0.0.1', port=8000, endpoint='/v1/completions', model='/models/m', served_model_name='m',
            input_len=128, output_len=64, count=100, rate=4.0, concurrency=None, seed=0)


def test_argv_passes_backend_proxy_and_percentiles_explicitly():
    flags = bench_vllm.help_flags(HELP)
    assert bench_vllm.missing_flags(flags) == []
    argv = bench_vllm.argv('vllm', SPEC, flags, '/tmp/r', 'result.json')
    joined = ' '.join(argv)
    for part in ('vllm bench serve', '--backend openai', '--host 10.0.0.1 --port 8000', '--endpoint /v1/completions',
                 '--random-input-len 128 --random-output-len 64', '--num-prompts 100', '--request-rate 4.0',
                 '--percentile-metrics ttft,tpot,itl,e2el', '--metric-percentiles 50,90,99',
                 '--save-result --result-dir /tmp/r --result-filename result.json', '--served-model-name m',
                 '--ignore-eos', '--seed 0', '--save-detailed'):
        assert part in joined
    assert '--max-concurrency' not in argv
    closed = bench_vllm.argv('vllm', dict(SPEC, rate=None, concurrency=8), flags, '/t', 'r.json')
    assert closed[closed.index('--request-rate') + 1] == 'inf' and closed[closed.index('--max-concurrency') + 1] == '8'


def test_plain_help_of_vllm_0_23_lists_no_flag_so_help_all_is_read_first():
    assert bench_vllm.help_flags(HELP_PLAIN) == set()
    assert bench_vllm.missing_flags(bench_vllm.help_flags(HELP_PLAIN)) == list(bench_vllm.REQUIRED_FLAGS)
    assert bench_vllm.HELP_OPTIONS[0] == '--help=all'
    assert bench_vllm.missing_flags(bench_vllm.help_flags(HELP), 8) == []


def test_a_release_without_a_needed_flag_is_not_used_and_optional_flags_are_left_out():
    old = without(HELP, '--metric-percentiles', '--ignore-eos', '--save-detailed')
    flags = bench_vllm.help_flags(old)
    assert bench_vllm.missing_flags(flags) == ['--metric-percentiles']
    argv = bench_vllm.argv('vllm', SPEC, flags, '/t', 'r.json')
    assert '--ignore-eos' not in argv and '--save-detailed' not in argv
    assert bench_vllm.missing_flags(bench_vllm.help_flags(without(HELP, '--max-concurrency')), 8) == [
        '--max-concurrency']


def test_result_file_becomes_the_gate_form():
    data = {'completed': 98, 'failed': 2, 'duration': 25.0, 'request_throughput': 3.92, 'output_throughput': 250.9,
            'total_output_tokens': 6272, 'errors': ['', 'HTTP 500 Internal Server Error', ''],
            'mean_ttft_ms': 40.0, 'median_ttft_ms': 35.0, 'p50_ttft_ms': 35.5, 'p90_ttft_ms': 60.0, 'p99_ttft_ms': 90.0,
            'mean_tpot_ms': 12.0, 'median_tpot_ms': 11.0, 'p90_tpot_ms': 14.0, 'p99_tpot_ms': 20.0,
            'ttfts': [0.030, 0.040], 'output_lens': [65, 65],
            'itls': [[0.01, 0.02], [0.015]]}
    r = bench_vllm.normalize(data, 100)
    assert (r['completed'], r['failed'], r['errors']) == (98, 2, ['HTTP 500 Internal Server Error'])
    assert r['output_throughput'] == 250.9 and r['duration_s'] == 25.0
    assert r['ttft_ms']['p50'] == 35.5 and r['ttft_ms']['p99'] == 90.0 and r['ttft_ms']['min'] == pytest.approx(30)
    assert r['tpot_ms']['p50'] == 11.0  # median_* when p50_* is absent
    assert r['itl_ms']['max'] == pytest.approx(20) and r['itl_ms']['n'] == 3
    assert r['e2el_ms']['max'] == pytest.approx(60)  # ttft + its itls of the one without error (no release writes latencies)
    # before v0.13 there is no "failed": what did not complete failed
    old = dict((k, v) for k, v in data.items() if k not in ('failed', 'ttfts', 'itls', 'output_lens'))
    r = bench_vllm.normalize(old, 100)
    assert r['failed'] == 2 and r['ttft_ms']['min'] is None and r['ttft_ms']['n'] == 98 and r['e2el_ms']['p99'] is None


def test_e2el_and_tpot_come_from_ttfts_and_itls_as_vllm_0_23_writes_them():
    # vLLM 0.23's result file (benchmarks/serve.py): no `latencies`; lists per request, a failed one with ttft 0,
    # no itls and its error; output_lens 0 for it
    data = {'completed': 2, 'failed': 1, 'duration': 2.0, 'errors': ['', 'HTTP 500', ''],
            'ttfts': [0.05, 0.0, 0.10], 'itls': [[0.01, 0.02, 0.03], [], [0.04]], 'output_lens': [4, 0, 2],
            'mean_e2el_ms': 80.0, 'p99_e2el_ms': 140.0}
    r = bench_vllm.normalize(data, 3)
    assert r['e2el_ms']['min'] == pytest.approx(110) and r['e2el_ms']['max'] == pytest.approx(140)
    assert r['e2el_ms']['n'] == 2 and r['e2el_ms']['p99'] == 140.0
    # TPOT = (latency - ttft) / (output tokens - 1): 60/3 and 40/1
    assert r['tpot_ms']['min'] == pytest.approx(20) and r['tpot_ms']['max'] == pytest.approx(40)


# ------------------------------------------------------------------ the gate


def result(**kw):
    lat = dict(n=100, mean=30.0, p50=28.0, p90=40.0, p99=55.0, min=20.0, max=60.0)
    r = dict(completed=100, failed=0, errors=[], duration_s=25.0, request_throughput=4.0, output_throughput=256.0,
             total_output_tokens=6400, ttft_ms=dict(lat), tpot_ms=dict(lat, p99=12.0), itl_ms=dict(lat),
             e2el_ms=dict(lat, p99=900.0))
    r.update(kw)
    return r


LOAD = dict(tool='loadgen', model='m', input_len=128, output_len=64, count=100, rate=4.0, concurrency=None,
            endpoint='/v1/completions', warmup=10)


def record(res=None, pairs=None, baseline=None, settings=None, unseen=(), run_id='20261204T150000Z'):
    return bench_gate.make_record(run_id, 'c1', dict(host='p1', url='http://10.0.0.1:8000'), 'loadgen', dict(LOAD),
                                  res or result(), pairs or [], unseen, baseline, settings or {})


def checks(rec):
    return [f['check'] for f in rec['findings'] if not f['ignored']]


def test_a_clean_run_passes_and_unset_slos_are_not_gated():
    rec = record(result(ttft_ms=dict(result()['ttft_ms'], p99=99999.0)))
    assert rec['passed'] and rec['findings'] == []
    assert rec['notes'] == ['no baseline saved (save one with -e vllm_pd_bench_save_baseline=true)']


def test_any_failed_request_fails_the_gate_with_the_errors():
    rec = record(result(completed=99, failed=1, errors=['HTTP 500 Internal Server Error']))
    assert not rec['passed'] and checks(rec) == ['BenchRequestsFailed']
    assert '1 of 100 requests failed' in rec['findings'][0]['message']
    assert 'HTTP 500' in rec['findings'][0]['message']
    rec = record(result(completed=97, failed=3, errors=['RuntimeError: a', 'RuntimeError: b', 'RuntimeError: a']))
    assert rec['findings'][0]['message'].endswith('on p1: RuntimeError: a (2 times); RuntimeError: b')


def test_p99_ttft_and_tpot_above_their_slo():
    rec = record(settings=dict(slo_ttft_ms=50, slo_tpot_ms=12.0))
    assert checks(rec) == ['BenchTtftAboveSlo']  # tpot p99 12.0 is not above 12.0
    assert 'p99 TTFT 55.00 ms is above vllm_pd_slo_ttft_ms 50 ms' in rec['findings'][0]['message']
    assert checks(record(settings=dict(slo_tpot_ms='11.5'))) == ['BenchTpotAboveSlo']


def test_throughput_below_baseline_times_tolerance_only_for_the_same_load():
    base = record(result(output_throughput=300.0), run_id='20261201T000000Z')
    rec = record(result(output_throughput=292.0), baseline=base, settings=dict(baseline_tolerance=0.97))
    assert rec['passed'] and rec['gate']['baseline'] == dict(run_id='20261201T000000Z', output_throughput=300.0)
    rec = record(result(output_throughput=290.0), baseline=base, settings=dict(baseline_tolerance=0.98))
    assert checks(rec) == ['BenchThroughputBelowBaseline']
    assert 'below baseline 20261201T000000Z 300.00 tok/s x vllm_pd_baseline_tolerance 0.98 = 294.00' in \
        rec['findings'][0]['message']
    other = copy.deepcopy(base)
    other['load']['input_len'] = 1024
    rec = record(result(output_throughput=1.0), baseline=other)
    assert rec['passed'] and rec['gate']['baseline'] is None
    assert 'another load (input_len 1024 -> 128)' in rec['notes'][0]


def test_slow_kv_pair_is_named_with_its_p99():
    logs = [dict(host='d1', address='10.0.0.2', text=kv_text([10] * 50)),
            dict(host='d2', address='10.0.0.3', text=kv_text([10] * 45 + [400] * 5, d_ip='10.0.0.3'))]
    pairs = bench_kv.pair_times(logs, {'10.0.0.1': 'p1'})
    rec = record(pairs=pairs, settings=dict(slo_kv_transfer_ms=100))
    assert checks(rec) == ['BenchKvTransferSlow']
    f = rec['findings'][0]
    assert f['pair'] == 'p1 -> d2' and f['value'] == pytest.approx(400.0)
    assert 'KV transfer p1 -> d2 (10.0.0.1 -> 10.0.0.3): p99 400.00 ms is above vllm_pd_slo_kv_transfer_ms 100 ms' \
        in f['message']
    assert record(pairs=pairs)['passed']  # no bound, no finding


def test_a_decode_host_without_kv_lines_fails_only_when_the_kv_bound_is_set():
    assert checks(record(unseen=['d1'], settings=dict(slo_kv_transfer_ms=100))) == ['BenchKvTransferUnseen']
    assert record(unseen=['d1'])['passed']


def test_ignored_checks_only_warn_and_every_check_is_registered():
    rec = record(result(failed=3, completed=97), settings=dict(ignore=['BenchRequestsFailed']))
    assert rec['passed'] and rec['findings'][0]['ignored']
    assert set(bench_gate.GATE_CHECKS) <= set(check_names.CHECKS)
    assert check_names.validate_ignore(['BenchKvTransferSlow']) is None


def test_comparison_with_the_last_run():
    prev = record(result(output_throughput=200.0), run_id='20261203T000000Z')
    lines = bench_gate.comparison(record(), prev)
    assert lines[0].split()[:4] == ['cluster', 'c1', '20261203T000000Z', '20261204T150000Z']
    row = [ln for ln in lines if ln.startswith('out tok/s')][0]
    assert row.split()[-3:] == ['200.00', '256.00', '+28.0%']
    alone = bench_gate.comparison(record(), None)
    assert 'no earlier run' in alone[0] and [ln for ln in alone if ln.startswith('failed')][0].split()[-2:] == ['-', '0']


@pytest.mark.parametrize('values,variable', [
    ({'vllm_pd_slo_ttft_ms': 'fast'}, 'vllm_pd_slo_ttft_ms'),
    ({'vllm_pd_slo_tpot_ms': 0}, 'vllm_pd_slo_tpot_ms'),
    ({'vllm_pd_bench_requests': 1.5}, 'vllm_pd_bench_requests'),
    ({'vllm_pd_bench_requests': True}, 'vllm_pd_bench_requests'),
    ({'vllm_pd_bench_output_len': 1}, 'vllm_pd_bench_output_len'),
    ({'vllm_pd_baseline_tolerance': 1.2}, 'vllm_pd_baseline_tolerance'),
    ({'vllm_pd_bench_tool': 'ab'}, 'vllm_pd_bench_tool'),
    ({'vllm_pd_bench_rate': None}, 'vllm_pd_bench_rate'),
    ({'vllm_pd_bench_warmup': ''}, 'vllm_pd_bench_warmup'),
    ({'vllm_pd_benchmark': 'sure'}, 'vllm_pd_benchmark'),
])
def test_bad_settings_name_the_variable_and_the_fix(values, variable):
    problems = bench_settings.settings_problems(values)
    assert [p[0] for p in problems] == [variable]
    assert variable in problems[0][1] and problems[0][2]


def test_good_settings_pass():
    good = {'vllm_pd_slo_ttft_ms': None, 'vllm_pd_slo_tpot_ms': '50', 'vllm_pd_bench_rate': None,
            'vllm_pd_bench_concurrency': 8, 'vllm_pd_baseline_tolerance': 0.9, 'vllm_pd_bench_requests': '200',
            'vllm_pd_bench_tool': 'loadgen', 'vllm_pd_bench_save_baseline': 'true', 'vllm_pd_benchmark': False}
    assert bench_settings.settings_problems(good) == []


def test_inventory_validation_names_host_variable_and_fix():
    data = dict(groups=dict(vllm_pd_prefill=['p1'], vllm_pd_decode=['d1'], vllm_pd_proxy=['p1'], cluster_a=['p1', 'd1']),
                hosts=dict(p1=dict(vllm_pd_cluster='a', vllm_pd_slo_tpot_ms='50ms'), d1=dict(vllm_pd_cluster='a')))
    errors = [e for e in inventory_errors(data) if e['variable'].startswith('vllm_pd_slo')]
    assert len(errors) == 1
    assert errors[0]['host'] == 'p1' and errors[0]['cluster'] == 'a'
    assert "vllm_pd_slo_tpot_ms='50ms' must be a number above 0" in errors[0]['text'] and 'Fix:' in errors[0]['text']


# ------------------------------------------------------------------ the page


class Numbers(HTMLParser):
    """Every element with data-key: {(cluster, key): text}; and what could fetch or run something."""

    def __init__(self):
        HTMLParser.__init__(self)
        self.numbers, self.tags, self._open = {}, [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if 'data-key' in a:
            self._open = (a['data-cluster'], a['data-key'])
            self.numbers[self._open] = ''

    def handle_data(self, data):
        if self._open:
            self.numbers[self._open] += data

    def handle_endtag(self, tag):
        self._open = None


def shown(value):
    """How the page must write a JSON number (independent of bench_report.display)."""
    if value is None:
        return '-'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return '%d' % value if isinstance(value, int) else '%.2f' % value


def value_at(rec, key):
    if key.startswith('kv_transfer.'):
        rest = key[len('kv_transfer.'):]
        pair = next(p for p in rec['kv_transfer'] if rest.startswith(p['pair'] + '.'))
        return bench_gate._get(pair, rest[len(pair['pair']) + 1:])  # pylint: disable=protected-access
    return bench_gate._get(rec, key)  # pylint: disable=protected-access


def test_page_shows_the_json_numbers_and_fetches_nothing():
    logs = [dict(host='d1', address='10.0.0.2', text=kv_text([10.5, 12.25, 400]))]
    rec = record(pairs=bench_kv.pair_times(logs, {'10.0.0.1': 'p1'}), settings=dict(slo_kv_transfer_ms=100))
    page = bench_report.render_html(rec['run_id'], [rec])
    parser = Numbers()
    parser.feed(page)
    assert len(parser.numbers) >= 4 * 7 + 6 + 8 + 1
    for (cluster, key), text in parser.numbers.items():
        assert cluster == 'c1'
        assert text == shown(value_at(rec, key)), key
    assert parser.numbers[('c1', 'kv_transfer.p1 -> d1.ms.max')] == '400.00'
    assert parser.numbers[('c1', 'passed')] == 'false'
    assert not [t for t, a in parser.tags if t in ('script', 'link', 'img', 'iframe', 'object')]
    # the SVG namespace and the proxy named in the text; nothing to fetch
    assert set(re.findall(r'https?://[^"\s<)]+', page)) == set(['http://www.w3.org/2000/svg', 'http://10.0.0.1:8000'])
    assert 'BenchKvTransferSlow' in page and page.count('<svg') == 2
