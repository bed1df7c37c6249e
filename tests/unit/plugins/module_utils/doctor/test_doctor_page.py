# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The doctor page's data (histograms from /metrics, KV per pair, ports, proxy members) and its HTML."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re
import xml.etree.ElementTree as ET
from html import unescape

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_metrics as M
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_findings import diagnose
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_page import observe, port_states
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_report import render_html

from test_doctor_findings import D_IP, P_IP, cluster, eng, holder

LAB = 'engine="0",model_name="m"'


def hist_text(name, buckets, count, total, labels=LAB):
    lines = ['# HELP %s h' % name, '# TYPE %s histogram' % name]
    lines += ['%s_bucket{%s,le="%s"} %s' % (name, labels, le, c) for le, c in buckets]
    lines += ['%s_count{%s} %s' % (name, labels, count), '%s_sum{%s} %s' % (name, labels, total)]
    return '\n'.join(lines) + '\n'


# 10 requests: 2 <= 0.1 s, 6 more <= 0.5 s, 1 more <= 1 s, 1 more <= 2.5 s
TTFT = hist_text('vllm:time_to_first_token_seconds', [('0.1', 2), ('0.5', 8), ('1.0', 9), ('2.5', 10), ('+Inf', 10)],
                 10, 4.2)


def test_quantiles_interpolate_within_the_bucket_like_histogram_quantile():
    h = M.histogram(M.parse_samples(TTFT), 'vllm:time_to_first_token_seconds')
    assert h['buckets'][-1] == (float('inf'), 10.0) and h['count'] == 10 and h['sum'] == 4.2
    # rank 5 lies in (0.1, 0.5] holding ranks 3..8: 0.1 + 0.4 * (5 - 2) / 6
    assert M.quantile(0.5, h['buckets']) == pytest.approx(0.3)
    # rank 9 is the upper bound of (0.5, 1.0]; rank 9.9 lies in (1.0, 2.5]
    assert M.quantile(0.9, h['buckets']) == pytest.approx(1.0)
    assert M.quantile(0.99, h['buckets']) == pytest.approx(2.35)
    # a rank in +Inf: the highest finite bound
    assert M.quantile(0.99, [(0.1, 2.0), (float('inf'), 10.0)]) == pytest.approx(0.1)
    # the first bucket starts at 0
    assert M.quantile(0.1, h['buckets']) == pytest.approx(0.05)


def test_distribution_in_ms_with_bins_of_the_non_empty_buckets():
    d = M.distribution(M.histogram(M.parse_samples(TTFT), 'vllm:time_to_first_token_seconds'))
    assert d['n'] == 10 and d['mean'] == pytest.approx(420.0) and d['p50'] == pytest.approx(300.0)
    assert d['min'] is None and d['max'] is None
    assert d['bins'] == [[0.0, 100.0, 2], [100.0, 500.0, 6], [500.0, 1000.0, 1], [1000.0, 2500.0, 1]]


def test_no_observations_and_absent_metric():
    empty = hist_text('vllm:e2e_request_latency_seconds', [('0.3', 0), ('+Inf', 0)], 0, 0.0)
    lat = M.latencies(empty)
    assert lat['ttft_ms'] is None and lat['itl_ms'] is None
    assert lat['e2el_ms']['n'] == 0 and lat['e2el_ms']['p50'] is None and lat['e2el_ms']['bins'] == []


def test_series_are_summed_and_the_older_itl_name_is_read():
    text = (hist_text('vllm:time_per_output_token_seconds', [('0.01', 1), ('+Inf', 2)], 2, 0.03,
                      'engine="0",model_name="m"')
            + hist_text('vllm:time_per_output_token_seconds', [('0.01', 3), ('+Inf', 4)], 4, 0.05,
                        'engine="1",model_name="m"'))
    itl = M.latencies(text)['itl_ms']
    assert itl['metric'] == 'vllm:time_per_output_token_seconds' and itl['n'] == 6
    assert itl['bins'] == [[0.0, 10.0, 4], [10.0, None, 2]]
    # the current name wins when both are exposed (a release in its deprecation window)
    both = text + hist_text('vllm:inter_token_latency_seconds', [('0.01', 1), ('+Inf', 1)], 1, 0.005)
    assert M.latencies(both)['itl_ms']['metric'] == 'vllm:inter_token_latency_seconds'


def test_only_the_histograms_read_must_parse():
    """common/prom_text.py reads only the doctor's series: garbage elsewhere is not read; a garbled line of a
    histogram the doctor reads is an error (it was skipped before, and the distribution silently lacked it)."""
    ttft = 'vllm:time_to_first_token_seconds'
    good = hist_text(ttft, [('0.01', 1), ('+Inf', 2)], 2, 0.03)
    assert M.latencies('# HELP x\nnot a sample line\nvllm:x{a="1"} NaNx\n' + good)['ttft_ms']['n'] == 2
    with pytest.raises(ValueError, match='line 1 of the metrics text is not a sample of %s_count' % ttft):
        M.latencies('%s_count{engine="0"} 2x\n' % ttft + good)


def test_port_states_name_each_port():
    g = dict(ports=[28002, 28003, 28004, 28005], address=P_IP, ok=[holder(28002, P_IP), holder(28005, P_IP)],
             foreign=[holder(28003, P_IP, pid=7, unit='grafana-server.service', process='grafana')],
             wrong_address=[holder(28004, '127.0.0.1')], blocking=[], closed=[])
    # 28005: the engine listens, but another process also holds it: vLLM cannot bind it
    g['foreign'].append(holder(28005, '0.0.0.0', pid=8, unit='x.service', process='x'))
    states = port_states(g)
    assert [(s['port'], s['state']) for s in states] == [
        (28002, 'listening'), (28003, 'held by another process'), (28004, 'on another address'),
        (28005, 'held by another process')]
    assert 'grafana-server.service' in states[1]['detail']
    g['ok'] = []
    assert port_states(g)[0] == dict(port=28002, state='closed', detail='no listener on %s:28002' % P_IP)


def kv_lines(request_ms, d_ip=D_IP, p_ip=P_IP):
    return '\n'.join('KV cache transfer for request %s took %.2f ms. local_ip %s local_device_id 0 '
                     'remote_session_id %s:30000' % (r, ms, d_ip, p_ip) for r, ms in request_ms)


def observed_hosts():
    hosts = cluster()
    hosts['d1']['kv_log'] = dict(text=kv_lines([('r1', 3.5), ('r1', 4.5), ('r2', 10.0)]), error=None)
    hosts['p1']['metrics'] = [dict(kind='prefill', unit='vllm-pd-prefill.service', url='u', text=TTFT, error=None)]
    hosts['d1']['metrics'] = [dict(kind='decode', unit='vllm-pd-decode.service', url='u', text=None,
                                   error='GET /metrics: Connection refused')]
    hosts['p1']['proxy_members'] = dict(source='admin API', error=None,
                                        live=dict(prefill=['%s:8100' % P_IP], decode=[]),
                                        desired=dict(prefill=['%s:8100' % P_IP], decode=['%s:8200' % D_IP]),
                                        missing=dict(prefill=[], decode=['%s:8200' % D_IP]),
                                        extra=dict(prefill=[], decode=[]), draining=dict(prefill=[], decode=[]),
                                        isolated=dict(prefill=['%s:8100' % P_IP]))
    return hosts


def test_observe_adds_pairs_latency_ports_and_members():
    hosts = observed_hosts()
    _findings, clusters = diagnose(hosts)
    (cl,) = observe(hosts, clusters)
    (pair,) = cl['kv_transfer']
    assert (pair['pair'], pair['requests'], pair['samples']) == ('p1 -> d1', 2, [3.5, 4.5, 10.0])
    assert cl['kv_silent'] == []
    p_lat, d_lat = cl['latency']
    assert p_lat['host'] == 'p1' and p_lat['ttft_ms']['n'] == 10 and p_lat['itl_ms'] is None
    assert d_lat['error'] == 'GET /metrics: Connection refused' and d_lat['ttft_ms'] is None
    p_inst = cl['instances'][0]
    assert p_inst['group'] == '28002-28009' and [s['state'] for s in p_inst['ports']] == ['listening'] * 8
    assert cl['instances'][1]['ports'] == [] and cl['instances'][1]['api_listening'] == [D_IP]
    assert cl['proxy_members'][0]['host'] == 'p1' and cl['proxy_members'][0]['missing']['decode'] == ['%s:8200' % D_IP]


def test_a_decode_without_a_line_or_journal_is_named():
    hosts = cluster()
    hosts['d1']['kv_log'] = dict(text='', error='journalctl: no such file')
    _f, clusters = diagnose(hosts)
    (cl,) = observe(hosts, clusters)
    assert cl['kv_transfer'] == [] and cl['kv_silent'] == [dict(host='d1', error='journalctl: no such file', finished=None)]


@pytest.mark.parametrize('finished, said', [(0, True), (5, False)])
def test_a_silent_decode_says_whether_any_request_ever_reached_it(finished, said):
    hosts = cluster()
    hosts['d1']['kv_log'] = dict(text='INFO nothing here', error=None)
    hosts['d1']['metrics'] = [dict(kind='decode', unit='vllm-pd-decode.service', url='u', error=None,
                                   text='vllm:request_success_total{finished_reason="length"} %d.0\n' % finished)]
    findings, clusters = diagnose(hosts)
    (cl,) = observe(hosts, clusters)
    assert cl['kv_silent'] == [dict(host='d1', error=None, finished=finished)]
    page = unescape(render_html(clusters, findings, 'doctor', 'last 15 min'))
    assert 'no KV transfer line in the window' in page
    assert ('finished no request since they started' in page) is said


def value_at(findings, cl, key):
    value = dict(findings=findings) if key.startswith('findings.') else cl
    for part in key.split('.'):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def shown(value):
    """How the page must write a JSON value (independent of report_svg.display)."""
    if value is None:
        return '-'
    if isinstance(value, int):
        return '%d' % value
    return '%.2f' % value if isinstance(value, float) else str(value)


def test_page_values_equal_the_json_and_the_page_is_self_contained():
    hosts = observed_hosts()
    eng(hosts, 'p1')['group']['foreign'] = [holder(28004, P_IP, pid=7, unit='grafana-server.service',
                                                   process='<grafana>')]
    findings, clusters = diagnose(hosts)
    observe(hosts, clusters)
    html = render_html(clusters, findings, 'doctor', 'last 15 min')
    values = re.findall(r'<(\w+) data-cluster="([^"]+)" data-key="([^"]+)"[^>]*>([^<]*)</\1>', html)
    keys = set(k for _t, _c, k, _v in values)
    for _tag, c, key, text in values:
        assert c == 'c1' and unescape(text) == shown(value_at(findings, clusters[0], key)), key
    assert {'kv_transfer.0.ms.p99', 'kv_transfer.0.requests', 'latency.0.ttft_ms.p50', 'latency.1.error',
            'instances.0.ports.2.state', 'instances.1.state', 'proxy_members.0.missing.decode.0',
            'proxy_members.0.isolated.prefill.0', 'findings.0.check'} <= keys
    assert value_at(findings, clusters[0], 'instances.0.ports.2.state') == 'held by another process'
    assert '<grafana>' not in html
    assert not re.search(r'<(script|link|img|iframe|object)\b', html) and not re.search(r'(src|href)=|url\((?!#)', html)
    assert 'last 15 min' in html
    svgs = re.findall(r'<svg.*?</svg>', html, re.S)
    # topology, KV per pair, TTFT, ITL, E2EL
    assert len(svgs) == 5
    for svg in svgs:
        ET.fromstring(svg)
    assert re.search(r'<title>100\.00\.\.500\.00 ms: 6</title>', html)


def test_metrics_reads_from_the_uri_loop_results():
    item = {'kind': 'decode', 'unit': 'vllm-pd-decode.service'}
    results = [dict(item=dict(item, kind='prefill'), status=200, url='http://a:8100/metrics', content='# HELP x\n'),
               dict(item=item, status=-1, url='http://a:8200/metrics', msg='Status code was -1: refused'),
               dict(item=item, status=503, content='busy'),
               dict(item=item),
               dict(item=item, status=200)]
    assert M.metrics_reads(results) == [
        {'kind': 'prefill', 'unit': 'vllm-pd-decode.service', 'url': 'http://a:8100/metrics', 'text': '# HELP x\n', 'error': None},
        {'kind': 'decode', 'unit': 'vllm-pd-decode.service', 'url': 'http://a:8200/metrics', 'text': None,
         'error': 'GET /metrics: Status code was -1: refused'},
        {'kind': 'decode', 'unit': 'vllm-pd-decode.service', 'url': None, 'text': None, 'error': 'GET /metrics: status 503'},
        {'kind': 'decode', 'unit': 'vllm-pd-decode.service', 'url': None, 'text': None, 'error': 'GET /metrics: status ?'},
        {'kind': 'decode', 'unit': 'vllm-pd-decode.service', 'url': None, 'text': '', 'error': None}]
    assert M.metrics_reads([]) == []
