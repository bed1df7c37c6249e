# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drive pd_bench's main(): mode=run against a completions server on loopback (the built-in generator) and
against stand-ins for the `vllm` executable (with and without `bench serve`), mode=report on a results
directory."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.vllm_pd.ascend.plugins.modules import pd_bench as M

# vLLM 0.23.0's `vllm bench serve --help=all` and `--help` (scripts/vllm-bench-help over its sdist)
FIXTURES = os.path.join(os.path.dirname(__file__), '..', 'module_utils', 'verify', 'fixtures')
HELP_ALL = os.path.join(FIXTURES, 'vllm-0.23.0-bench-serve-help-all.txt')
HELP_PLAIN = os.path.join(FIXTURES, 'vllm-0.23.0-bench-serve-help.txt')


class Completions(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        Completions.bodies.append(body)
        Completions.auth.append(self.headers.get('Authorization'))
        self.send_response(200)
        self.send_header('Content-Type', 'text/event-stream')
        self.end_headers()
        for i in range(body['max_tokens']):
            self.wfile.write(b'data: %s\n\n' % json.dumps({'choices': [{'text': ' w%d' % i}]}).encode())
        self.wfile.write(b'data: [DONE]\n\n')

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Completions.bodies, Completions.auth = [], []
    srv = ThreadingHTTPServer(('127.0.0.1', 0), Completions)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield 'http://127.0.0.1:%d' % srv.server_address[1]
    srv.shutdown()


def executable(path, text):
    path.write_text('#!/bin/sh\n' + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def run_args(url, **kw):
    args = dict(mode='run', url=url, model='/models/m', served_model_name='m', input_len=12, output_len=4, count=6,
                rate=50.0, timeout=10)
    args.update(kw)
    return args


def test_auto_without_bench_serve_runs_the_builtin_generator(run_module, server, tmp_path):
    vllm = executable(tmp_path / 'vllm', "echo \"vllm: error: argument command: invalid choice: '$1' "
                                         "(choose from 'serve')\" >&2; exit 2\n")
    failed, res = run_module(M, run_args(server, vllm_binary=vllm, warmup=3))
    assert not failed, res
    assert res['tool'] == 'loadgen' and "invalid choice: 'bench'" in res['tool_note'] and res['argv'] == []
    r = res['result']
    assert r['completed'] == 6 and r['failed'] == 0 and r['total_output_tokens'] == 24 and 'samples' not in r
    assert r['ttft_ms']['n'] == 6 and r['itl_ms']['n'] == 18
    assert res['load'] == dict(model='m', input_len=12, output_len=4, count=6, rate=50.0, concurrency=None,
                               endpoint='/v1/completions', warmup=3, tool='loadgen')
    body = Completions.bodies[0]
    assert body['model'] == 'm' and body['max_tokens'] == 4 and len(body['prompt'].split()) == 12 and body['stream']


def test_closed_loop_rate_0_with_concurrency_runs_the_builtin_generator(run_module, server):
    """vllm_pd_bench_rate: null -> benchmark_rate 0 (the role's default) -> the closed loop (issue 32)."""
    failed, res = run_module(M, run_args(server, tool='loadgen', rate=0, concurrency=2))
    assert not failed, res
    assert res['load']['rate'] is None and res['load']['concurrency'] == 2
    assert res['result']['completed'] == 6 and res['result']['failed'] == 0


def test_tool_vllm_without_bench_serve_fails_with_the_fix(run_module, server, tmp_path):
    vllm = executable(tmp_path / 'vllm', 'echo "vllm: error: invalid choice" >&2; exit 2\n')
    failed, res = run_module(M, run_args(server, vllm_binary=vllm, tool='vllm'))
    assert failed and 'tool=vllm, but vllm bench serve cannot run here' in res['msg']
    assert 'vllm_pd_bench_tool: loadgen' in res['msg'] and Completions.bodies == []


def test_auto_with_bench_serve_runs_it_and_reads_its_result(run_module, server, tmp_path):
    seen = tmp_path / 'argv'
    result = dict(completed=6, failed=0, duration=1.5, request_throughput=4.0, output_throughput=16.0,
                  total_output_tokens=24, mean_ttft_ms=5.0, median_ttft_ms=4.0, p50_ttft_ms=4.0, p90_ttft_ms=8.0,
                  p99_ttft_ms=9.0)
    vllm = executable(tmp_path / 'vllm', (
        'if [ "$3" = "--help=all" ]; then cat %s; exit 0; fi\n'
        'if [ "$3" = "--help" ]; then cat %s; exit 0; fi\n'
        'echo "$@" > %s\n'
        'while [ $# -gt 0 ]; do case "$1" in --result-dir) d=$2;; --result-filename) f=$2;; esac; shift; done\n'
        "echo '%s' > \"$d/$f\"\n") % (HELP_ALL, HELP_PLAIN, seen, json.dumps(result)))
    failed, res = run_module(M, run_args(server, vllm_binary=vllm, concurrency=2))
    assert not failed, res
    assert res['tool'] == 'vllm bench serve' and res['load']['tool'] == 'vllm bench serve'
    argv = seen.read_text().split()
    assert argv[:2] == ['bench', 'serve'] and '--host' in argv and argv[argv.index('--port') + 1] == server.rsplit(':', 1)[1]
    assert argv[argv.index('--max-concurrency') + 1] == '2' and '--ignore-eos' in argv
    assert res['result']['ttft_ms']['p99'] == 9.0 and res['result']['completed'] == 6
    assert not os.path.exists(argv[argv.index('--result-dir') + 1])  # its result directory is removed


def test_both_tools_carry_the_api_key_of_the_env_file_and_never_return_it(run_module, server, tmp_path):
    env = tmp_path / 'proxy.env'
    env.write_text('# managed\nOPENAI_API_KEY="sk-bench \\"q\\""\n')
    key = 'sk-bench "q"'
    failed, res = run_module(M, run_args(server, tool='loadgen', api_key_file=str(env)))
    assert not failed, res
    assert Completions.auth == ['Bearer ' + key] * 6 and key not in json.dumps(res)
    # vllm bench serve reads OPENAI_API_KEY from its environment: the key is on no command line
    seen, got = tmp_path / 'argv', tmp_path / 'key'
    result = dict(completed=6, failed=0, duration=1.5, mean_ttft_ms=5.0, p99_ttft_ms=9.0)
    vllm = executable(tmp_path / 'vllm', (
        'if [ "$3" = "--help=all" ]; then cat %s; exit 0; fi\n'
        'echo "$@" > %s; printf %%s "$OPENAI_API_KEY" > %s\n'
        'while [ $# -gt 0 ]; do case "$1" in --result-dir) d=$2;; --result-filename) f=$2;; esac; shift; done\n'
        "echo '%s' > \"$d/$f\"\n") % (HELP_ALL, seen, got, json.dumps(result)))
    failed, res = run_module(M, run_args(server, vllm_binary=vllm, concurrency=2, api_key_file=str(env)))
    assert not failed, res
    assert got.read_text() == key and 'sk-bench' not in seen.read_text() and 'sk-bench' not in json.dumps(res)
    # no file: no key, no header
    Completions.auth = []
    failed, res = run_module(M, run_args(server, tool='loadgen', api_key_file=str(tmp_path / 'none.env')))
    assert not failed and Completions.auth == [None] * 6


@pytest.mark.parametrize('args,msg', [
    (dict(url='http://127.0.0.1:8000', rate=0, concurrency=0), 'set rate (requests/s) or concurrency'),
    (dict(url='127.0.0.1:8000'), 'url=127.0.0.1:8000 is not http://ADDRESS:PORT'),
    (dict(url='http://127.0.0.1:8000', output_len=1), 'output_len=1 must be at least 2'),
])
def test_run_refuses_parameters_that_describe_no_load(run_module, args, msg):
    failed, res = run_module(M, run_args(**args))
    assert failed and msg in res['msg']


def lat(p99):
    return dict(n=10, mean=p99 / 2, p50=p99 / 2, p90=p99 * 0.9, p99=p99, min=1.0, max=p99)


def cluster(throughput, failed=0, kv='', settings=None):
    load = dict(model='m', input_len=12, output_len=4, count=10, rate=4.0, concurrency=None, endpoint='/v1/completions',
                warmup=2, tool='loadgen')
    result = dict(completed=10 - failed, failed=failed, errors=['HTTP 500'] * failed, duration_s=2.5,
                  request_throughput=4.0, output_throughput=throughput, total_output_tokens=40,
                  ttft_ms=lat(50.0), tpot_ms=lat(10.0), itl_ms=lat(10.0), e2el_ms=lat(90.0))
    return dict(cluster='c1', proxy=dict(host='p1', url='http://10.0.0.1:8000'),
                run=dict(tool='loadgen', tool_note='', load=load, result=result),
                decode_logs=[dict(host='d1', address='10.0.0.2', text=kv)], prefill_by_address={'10.0.0.1': 'p1'},
                settings=settings or {})


KV = '\n'.join('KV cache transfer for request r%d took %d.00 ms. local_ip 10.0.0.2 local_device_id 0 '
               'remote_session_id 10.0.0.1:16000' % (i, 10 + i) for i in range(10))


def report(run_module, tmp_path, run_id, clusters, **kw):
    args = dict(mode='report', results_dir=str(tmp_path), run_id=run_id, clusters=clusters)
    args.update(kw)
    return run_module(M, args)


def test_report_saves_runs_baseline_and_page_and_compares(run_module, tmp_path):
    failed, res = report(run_module, tmp_path, '20261204T100000Z', [cluster(100.0, kv=KV)], save_baseline=True)
    assert not failed and res['changed'] and res['failing_clusters'] == []
    assert res['files'] == [str(tmp_path / '20261204T100000Z.html'), str(tmp_path / 'c1' / '20261204T100000Z.json'),
                            str(tmp_path / 'c1' / 'baseline.json')]
    saved = json.loads((tmp_path / 'c1' / '20261204T100000Z.json').read_text())
    assert saved['kv_transfer'][0]['pair'] == 'p1 -> d1' and saved['kv_transfer'][0]['ms']['n'] == 10

    # slower than the baseline x 0.97: a named finding, compared with the last run in the table
    failed, res = report(run_module, tmp_path, '20261204T110000Z', [cluster(90.0, kv=KV)])
    assert not failed and res['failing_clusters'] == ['c1']
    assert [f['check'] for f in res['findings']] == ['BenchThroughputBelowBaseline']
    row = [ln for ln in res['table'] if ln.startswith('out tok/s')][0]
    assert row.split()[-3:] == ['100.00', '90.00', '-10.0%']
    assert '20261204T100000Z' in res['table'][0]

    # a run with failed requests is never saved as the baseline
    failed, res = report(run_module, tmp_path, '20261204T120000Z', [cluster(100.0, failed=2, kv=KV)],
                         save_baseline=True)
    assert res['failing_clusters'] == ['c1'] and 'not saved as baseline, 2 requests failed' in res['table'][-1]
    assert json.loads((tmp_path / 'c1' / 'baseline.json').read_text())['run_id'] == '20261204T100000Z'
    # the last run before this one, not the baseline, is the comparison
    assert '20261204T110000Z' in res['table'][0]


def test_report_in_check_mode_writes_nothing(run_module, tmp_path):
    failed, res = report(run_module, tmp_path, '20261204T100000Z', [cluster(100.0, kv=KV)], _ansible_check_mode=True)
    assert not failed and res['files'] == [] and not res['changed'] and os.listdir(str(tmp_path)) == []


def test_report_needs_a_run_id_that_sorts_as_time(run_module, tmp_path):
    failed, res = report(run_module, tmp_path, 'today', [])
    assert failed and 'run_id (YYYYmmddTHHMMSSZ)' in res['msg']
