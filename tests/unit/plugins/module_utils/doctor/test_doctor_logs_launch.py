# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The doctor's log signatures (the earliest is the cause) and the P/D fit of the running engines.

Log samples are journalctl -o short-iso lines of vLLM's logger format ("LEVEL MM-DD HH:MM:SS [file:line]")
with the texts vllm-ascend, Mooncake and CANN print (vllm-ascend-facts.md, field-failures.md).
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import json

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_launch as L
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_logs as G
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_findings import diagnose
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_host import scan_log

from test_doctor_findings import cluster  # noqa: E402  pylint: disable=import-error

D = '2026-12-02T14:%s+0000 pd-d1 vllm[4242]: (EngineCore_DP0 pid=4300) %s'
P = '2026-12-02T14:%s+0000 pd-p1 vllm[3131]: (EngineCore_DP0 pid=3200) %s'
# spec decoding on P only: D fails on the first request, then every transfer fails after it
D_SPEC = [
    D % ('03:04', 'INFO 12-02 14:03:04 [mooncake_connector.py:1020] KV cache transfer for request cmpl-a-0 took 4.10 ms.'),
    D % ('03:05', 'ERROR 12-02 14:03:05 [core.py:933] EngineCore encountered an issue. Traceback (most recent call last):'),
    D % ('03:05', '  File "/vllm-workspace/vllm/vllm/v1/spec_decode/eagle.py", line 212, in propose'),
    D % ('03:05', 'IndexError: list index out of range'),
    D % ('03:09', 'ERROR 12-02 14:03:09 [mooncake_connector.py:1013] Mooncake transfer failed for request. '
                  'remote_request_id=cmpl-b-0-1a2b3c4d, ret=-1.'),
    D % ('03:09', 'ERROR 12-02 14:03:09 [mooncake_connector.py:727] Failed to transfer KV cache for request '
                  'cmpl-b-0-1a2b3c4d: Mooncake transfer failed, ret: -1'),
    D % ('03:09', 'RuntimeError: Mooncake transfer failed, ret: -1'),
]


def test_line_time_reads_short_iso_with_its_offset():
    assert G.line_time('2026-12-02T14:03:04+0000 h u[1]: x') == G.line_time('2026-12-02T22:03:04+0800 h u[1]: x')
    assert G.line_time('1970-01-01T00:00:01+0000 h u: x') == 1.0
    assert G.line_time('2024-03-01T00:00:00+0000 h u: x') - G.line_time('2024-02-28T00:00:00+0000 h u: x') == 2 * 86400
    assert G.line_time('ERROR 12-02 14:03:09 [x.py:1] no journal stamp') is None
    assert G.line_time('2026-12-02T14:03:04.250000+0000 h u: x') - G.line_time('2026-12-02T14:03:04+0000 h u: x') == 0.25
    assert G.line_time('2026-13-02T14:03:04+0000 h u: x') is None  # no such month: not a journal stamp


def test_scan_keeps_the_first_line_of_each_signature():
    hits = scan_log(D_SPEC, 'decode')
    assert [h['check'] for h in hits] == ['LogTransferFailed', 'LogTransferFailed', 'LogSpecDecodeIndex']
    spec = hits[2]
    assert spec['first_index'] == 3 and spec['first'].endswith('IndexError: list index out of range')
    failed = [h for h in hits if h['text'] == 'Mooncake transfer failed'][0]
    assert failed['count'] == 3 and failed['first_index'] == 4 and failed['first_time'] > spec['first_time']


def with_logs(c, host, lines):
    c = copy.deepcopy(c)
    eng = c[host]['inspect']['engines'][0]
    eng['logs'] = scan_log(lines, eng['kind'])
    return c


def test_the_earliest_signature_is_the_cause_not_the_last_exception():
    findings, clusters = diagnose(with_logs(cluster(), 'd1', D_SPEC))
    root = clusters[0]['root_cause']
    # the table ranks a transfer failure first; the log says the index error came first
    assert root['check'] == 'LogSpecDecodeIndex', [f['check'] for f in findings]
    assert root['evidence'][0].endswith('IndexError: list index out of range')
    assert 'speculative decoding on both sides' in root['fix']
    assert [f['check'] for f in findings if f['role'] == 'consequence'] == ['LogTransferFailed', 'LogTransferFailed']


def test_across_hosts_the_journal_time_decides():
    # D cannot reach P's advertised address at 14:02; P is restarted and fails to bind at 14:05
    connect = 'E20261202 14:02:00.1 transfer_executor_base.cpp:321] Failed to connect to target: 172.17.0.16:25482'
    c = with_logs(cluster(), 'd1', [D % ('02:00', connect)])
    c = with_logs(c, 'p1', [P % ('05:00', 'zmq.error.ZMQError: Address already in use (addr=\'tcp://10.0.30.10:28002\')')])
    findings, clusters = diagnose(c)
    assert clusters[0]['root_cause']['check'] == 'LogConnectFailed'
    assert [f['check'] for f in findings if f['check'].startswith('Log')] == ['LogConnectFailed', 'LogBindFailed']
    # without timestamps the table's order stays (a bind error first)
    c = with_logs(cluster(), 'd1', ['Failed to connect to target: 172.17.0.16:25482'])
    c = with_logs(c, 'p1', ['Address already in use'])
    assert diagnose(c)[1][0]['root_cause']['check'] == 'LogBindFailed'


@pytest.mark.parametrize('line, check', [
    ("[ERROR] HCCL(4300,python3):2026-12-02-14:03:01.123.456 [adapter_hccp.cc:417] 'device ip' is not set correctly",
     'LogDeviceIpUnset'),
    ("ValueError: KV transfer 'prefill' config has a conflicting data parallel size", 'LogConfigConflict'),
    ('Sync batch data transfer timeout after 33061142969ns', 'LogTransferTimeout'),
    ('ValueError: Free memory on device npu:0 (3.25/61.0 GiB) on startup is less than desired GPU memory '
     'utilization (0.9, 54.9 GiB).', 'LogNpuMemoryTaken'),
    ('this package does not support hrtRaAiQpCreate', 'LogVersionMismatch'),
])
def test_field_signatures_are_recognised(line, check):
    assert [h['check'] for h in scan_log([line], 'decode')] == [check]


def argv(tp=4, extra=(), kv_extra=None):
    kv = dict(kv_connector='MooncakeConnectorV1', kv_role='kv_producer', kv_port=28002,
              kv_connector_extra_config=kv_extra or {'prefill': {'dp_size': 1, 'tp_size': 4},
                                                     'decode': {'dp_size': 1, 'tp_size': 4}})
    return ['/usr/bin/python3', '/usr/local/bin/vllm', 'serve', '/models/lab-model', '--host', '10.0.30.10',
            '--tensor-parallel-size', str(tp), '--kv-transfer-config', json.dumps(kv)] + list(extra)


def test_parse_launch_reads_settings_tp_kv_extra_and_only_the_fit_variables():
    got = L.parse_launch(argv(extra=['--block-size=64']), {'HCCL_RDMA_TIMEOUT': '18', 'HF_TOKEN': 'secret'})
    assert got['model'] == '/models/lab-model' and got['tp'] == 4 and got['settings']['block_size'] == 64
    assert got['kv_extra']['decode'] == {'dp_size': 1, 'tp_size': 4} and got['kv_role'] == 'kv_producer'
    assert got['env'] == {'HCCL_RDMA_TIMEOUT': '18'}  # a secret is never kept
    assert L.parse_launch(['/usr/bin/podman', 'run', 'img'], {}) is None
    assert 'not a whole number' in L.parse_launch(argv(extra=['--block-size', 'x']), {})['error']


def launched(c, host, words, env=None, fingerprint='f' * 64):
    eng = c[host]['inspect']['engines'][0]
    eng['launch'] = L.parse_launch(words, env or {})
    eng['launch']['model_facts'] = dict(path='/models/lab-model', fingerprint=fingerprint, files={'config.json': fingerprint})
    return c


def test_the_running_engines_are_checked_for_fit():
    c = launched(launched(cluster(), 'p1', argv()), 'd1', argv(extra=['--block-size', '64']))
    findings, clusters = diagnose(c)
    fit = [f for f in findings if f['check'] == 'BlockSizeMismatch']
    assert len(fit) == 1 and fit[0]['step'] == 2 and fit[0]['severity'] == 'error'
    assert 'unset (platform default 128) on prefill p1' in fit[0]['title'] and '64 on decode d1' in fit[0]['title']
    assert clusters[0]['root_cause'] is fit[0]
    # a healthy pair has no fit finding at all
    c = launched(launched(cluster(), 'p1', argv()), 'd1', argv())
    assert not [f for f in diagnose(c)[0] if f['step'] == 2]


def test_kv_extra_config_must_match_and_describe_each_side():
    other = {'prefill': {'dp_size': 2, 'tp_size': 4}, 'decode': {'dp_size': 1, 'tp_size': 4}}
    c = launched(launched(cluster(), 'p1', argv()), 'd1', argv(kv_extra=other))
    checks = [f['check'] for f in diagnose(c)[0]]
    assert checks.count('KvConfigMismatch') == 1
    c = launched(launched(cluster(), 'p1', argv(tp=8)), 'd1', argv())
    titles = [f['title'] for f in diagnose(c)[0] if f['check'] == 'KvConfigMismatch']
    assert titles == ['kv_connector_extra_config.prefill.tp_size is 4 on prefill p1, but it runs with tensor parallel '
                      'size 8'], titles


def test_a_model_that_differs_and_env_that_differs_are_named():
    c = launched(launched(cluster(), 'p1', argv(), {'HCCL_RDMA_TIMEOUT': '20'}), 'd1', argv(), {'HCCL_RDMA_TIMEOUT': '18'},
                 fingerprint='e' * 64)
    checks = sorted(f['check'] for f in diagnose(c)[0] if f['step'] == 2)
    assert checks == ['EngineEnvMismatch', 'ModelMismatch']


def test_running_engines_name_host_unit_and_kind_and_skip_what_is_no_vllm_serve():
    from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_launch import parse_launch, running_engines
    argv = ['/usr/bin/vllm', 'serve', '/m', '--tensor-parallel-size', '2']
    out = running_engines({'vllm-pd-prefill-0.service': argv, 'vllm-pd-proxy.service': ['python3', 'proxy.py'],
                           'vllm-pd-decode-0.service': argv}, 'h1')
    assert out == [dict(parse_launch(argv, {}), host='h1', unit='vllm-pd-prefill-0.service', kind='prefill'),
                   dict(parse_launch(argv, {}), host='h1', unit='vllm-pd-decode-0.service', kind='decode')]
    assert out[0]['tp'] == 2 and running_engines({}, 'h1') == []
