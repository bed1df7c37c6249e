# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""common/prom_text.py: the Prometheus text exposition format (0.0.4) as vLLM's prometheus_client writes it."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import math

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.prom_text import parse_samples, totals

TEXT = r'''# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="/data/m"} 12.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="/data/m"} 3.0
# HELP vllm:request_success_created Count of successfully processed requests.
# TYPE vllm:request_success_created gauge
vllm:request_success_created{engine="0",finished_reason="stop",model_name="/data/m"} 1.7231e+09
vllm:num_requests_running{engine="0",model_name="a \"b\", c\\d\ne}f"} 2
vllm:num_requests_waiting{ engine = "0" , } 1e0 1700000000000
vllm:kv_cache_usage_perc NaN
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} +Inf
vllm:x{le="-Inf"} -Inf

process_cpu_seconds_total 1.5E-3
'''


def test_samples_labels_and_values():
    got = parse_samples(TEXT)
    assert [s[0] for s in got] == [
        'vllm:request_success_total', 'vllm:request_success_total', 'vllm:request_success_created',
        'vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc',
        'vllm:e2e_request_latency_seconds_bucket', 'vllm:x', 'process_cpu_seconds_total']
    # escaped quotes, commas, backslashes, newlines and braces inside a label value
    assert got[3][1] == {'engine': '0', 'model_name': 'a "b", c\\d\ne}f'} and got[3][2] == 2.0
    # blanks inside the braces, a trailing comma and a timestamp
    assert got[4][1:] == ({'engine': '0'}, 1.0)
    assert math.isnan(got[5][2]) and got[6][2] == float('inf') and got[7][2] == float('-inf')
    assert got[8][2] == 0.0015 and got[2][2] == 1.7231e9


def test_totals_sum_label_sets_and_never_the_created_series():
    t = totals(TEXT, ['vllm:request_success_total', 'vllm:num_requests_running', 'vllm:absent'])
    assert t == {'vllm:request_success_total': 15.0, 'vllm:num_requests_running': 2.0, 'vllm:absent': 0.0}


def test_an_openmetrics_exemplar_is_not_the_value():
    assert parse_samples('a_bucket{le="1"} 3 # {trace_id="x"} 0.5 1700000000\n') == [('a_bucket', {'le': '1'}, 3.0)]


@pytest.mark.parametrize('line', [
    'vllm:num_requests_running 1x', 'vllm:num_requests_running', 'vllm:num_requests_running{engine="0"}',
    'vllm:num_requests_running{engine=0} 1', 'vllm:num_requests_running{engine="0" b="1"} 1',
    'vllm:num_requests_running{engine="0" 1', 'vllm:num_requests_running 1 2 3', 'vllm:num_requests_running 1 1.5',
    'vllm:num_requests_running 1_000',
])
def test_a_garbled_line_of_a_series_read_is_an_error_naming_the_line(line):
    with pytest.raises(ValueError, match='line 2 of the metrics text'):
        parse_samples('# TYPE x gauge\n' + line + '\n', ['vllm:num_requests_running'])
    # ... and is not read at all by a reader of other series
    assert parse_samples('# TYPE x gauge\n' + line + '\nvllm:y 1\n', ['vllm:y']) == [('vllm:y', {}, 1.0)]


def test_without_names_every_line_must_be_a_sample():
    with pytest.raises(ValueError, match='line 1 of the metrics text is not a sample'):
        parse_samples('<html>oops</html>\n')
