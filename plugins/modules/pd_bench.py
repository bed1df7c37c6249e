#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: pd_bench
short_description: Benchmark a vLLM PD cluster through its proxy and gate the result
version_added: "1.0.0"
description:
  - O(mode=run) runs on the proxy host of one cluster. It sends O(count) requests of a fixed prompt length
    O(input_len) and output length O(output_len) to the proxy, at a fixed O(rate) (requests per second) or with
    O(concurrency) requests in flight, and returns completed and failed requests, request and output throughput
    and TTFT, TPOT, ITL and end-to-end latency (mean, p50, p90, p99, min, max, in ms).
  - The load comes from C(vllm bench serve) when O(tool=vllm), or with O(tool=auto) when O(vllm_binary) has a
    C(bench serve) subcommand with every flag the gate needs (flags differ by vLLM release); otherwise from the
    collection's built-in load generator (standard library only).
  - O(mode=report) runs on the controller. It turns each cluster's run and its decode engines' log lines into
    KV transfer times per prefill->decode pair, gates the run (named findings), writes the run as JSON per
    cluster under O(results_dir), optionally as the cluster's baseline, writes one HTML page of the run, and
    returns a table comparing each cluster with its last saved run.
options:
  mode:
    description: V(run) on the proxy host, V(report) on the controller.
    type: str
    choices: [run, report]
    required: true
  url:
    description: O(mode=run) - the proxy, C(http://ADDRESS:PORT).
    type: str
  endpoint:
    description: O(mode=run) - the completions path.
    type: str
    default: /v1/completions
  model:
    description:
      - O(mode=run) - the model of the requests. C(vllm bench serve) also loads its tokenizer from it (a path on
        the proxy host or a name).
    type: str
  served_model_name:
    description: O(mode=run) - the name the engines serve the model as, when not O(model).
    type: str
    default: ""
  input_len:
    description:
      - O(mode=run) - prompt length. Tokens for C(vllm bench serve) (random dataset); words of a fixed prompt
        for the built-in generator, which has no tokenizer.
    type: int
    default: 128
  output_len:
    description: O(mode=run) - output tokens per request (C(max_tokens); C(--ignore-eos) where the release has it).
    type: int
    default: 64
  count:
    description: O(mode=run) - measured requests.
    type: int
    default: 100
  warmup:
    description:
      - O(mode=run) - requests sent before this run and not measured (saved with the load). The role sends them with
        O(tool=loadgen) and O(count) = the warm-up, then marks the decode logs, then runs the measured load.
    type: int
    default: 0
  rate:
    description:
      - O(mode=run) - requests per second. The built-in generator sends at fixed intervals, C(vllm bench serve)
        with Poisson arrivals. V(0) sends as fast as O(concurrency) allows.
    type: float
    default: 0
  concurrency:
    description: O(mode=run) - most requests in flight; V(0) no bound (then O(rate) must be set).
    type: int
    default: 0
  timeout:
    description: O(mode=run) - seconds one request may take.
    type: float
    default: 60
  tool:
    description: O(mode=run) - V(auto), V(vllm) (C(vllm bench serve), fail without it) or V(loadgen) (built-in).
    type: str
    choices: [auto, vllm, loadgen]
    default: auto
  vllm_binary:
    description: O(mode=run) - the C(vllm) executable on the proxy host.
    type: str
    default: vllm
  seed:
    description: O(mode=run) - seed of C(vllm bench serve)'s random prompts.
    type: int
    default: 0
  api_key_file:
    description:
      - O(mode=run) - an environment file on the host (the proxy's C(/etc/vllm-pd/proxy.env)) whose C(VLLM_API_KEY)
        or C(OPENAI_API_KEY) every request carries as the C(Authorization) Bearer token; the built-in generator
        sends the header, C(vllm bench serve) gets C(OPENAI_API_KEY) in its environment (never on its command
        line). The key is not returned. A missing file means no key.
    type: path
  clusters:
    description:
      - O(mode=report) - one entry per cluster, with keys C(cluster), C(proxy) (C(host), C(url)), C(run) (what
        O(mode=run) returned), C(decode_logs) (list of C(host), C(address), C(text), the decode engines'
        log lines of the measured run, and C(served), the requests its engines finished in the run or null when
        unknown; a D that served none is noted, not held to the KV transfer bound), C(prefill_by_address) (each prefill host's C(VLLM_HOST_IP) -> host) and
        C(settings), the cluster's gate - C(slo_ttft_ms), C(slo_tpot_ms), C(slo_kv_transfer_ms) (null - not gated),
        C(baseline_tolerance) (0.97) and C(ignore) (check names that only warn).
    type: list
    elements: dict
    default: []
  results_dir:
    description: O(mode=report) - directory on the controller; the runs of cluster C are saved in C(C/RUN_ID.json).
    type: path
  run_id:
    description: O(mode=report) - name of this run, C(YYYYmmddTHHMMSSZ) (sorts as time).
    type: str
  save_baseline:
    description:
      - O(mode=report) - also save each cluster's run as C(C/baseline.json), the throughput the next runs are gated
        against. A run with failed requests is never saved as the baseline.
    type: bool
    default: false
attributes:
  check_mode:
    details: O(mode=run) sends no request in check mode; O(mode=report) writes no file.
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
  - vllm_pd.ascend.attributes.read_only
notes:
  - The load runs on the proxy host, not on the controller, which may not reach the proxy in an air-gapped site.
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Benchmark the cluster through its proxy
  vllm_pd.ascend.pd_bench:
    mode: run
    url: http://10.0.30.10:8000
    model: /models/Qwen3-32B
    input_len: 1024
    output_len: 128
    count: 200
    rate: 4
  register: bench

- name: Gate, save and draw the run
  vllm_pd.ascend.pd_bench:
    mode: report
    run_id: 20261204T150000Z
    results_dir: /srv/bench
    clusters:
      - cluster: a
        proxy: {host: npu-p01, url: http://10.0.30.10:8000}
        run: "{{ bench }}"
        decode_logs: [{host: npu-d01, address: 10.0.30.11, text: "...KV cache transfer for request ..."}]
        prefill_by_address: {10.0.30.10: npu-p01}
        settings: {slo_ttft_ms: 2000, slo_tpot_ms: 50, slo_kv_transfer_ms: 100, baseline_tolerance: 0.97}
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
tool:
  description: O(mode=run) - the load tool used, V(vllm bench serve) or V(loadgen).
  returned: mode run
  type: str
tool_note:
  description: O(mode=run) - why O(tool=auto) used the built-in generator.
  returned: mode run
  type: str
argv:
  description: O(mode=run) - the C(vllm bench serve) command line, empty with the built-in generator.
  returned: mode run
  type: list
  elements: str
load:
  description: O(mode=run) - the load as asked (model, lengths, count, warmup, rate, concurrency, endpoint, tool).
  returned: mode run
  type: dict
result:
  description:
    - O(mode=run) - C(completed), C(failed), C(errors) (up to 20), C(duration_s), C(request_throughput),
      C(output_throughput), C(total_output_tokens) and C(ttft_ms), C(tpot_ms), C(itl_ms), C(e2el_ms), each
      C(n), C(mean), C(p50), C(p90), C(p99), C(min), C(max) (null when the tool does not give it).
  returned: mode run
  type: dict
records:
  description: O(mode=report) - the saved record of each cluster (load, result, kv_transfer per pair, findings, passed).
  returned: mode report
  type: list
  elements: dict
findings:
  description: O(mode=report) - every named finding (C(check), C(cluster), C(message), C(fix), C(ignored)).
  returned: mode report
  type: list
  elements: dict
failing_clusters:
  description: O(mode=report) - clusters with a finding that is not ignored.
  returned: mode report
  type: list
  elements: str
table:
  description: O(mode=report) - per cluster, this run against its last saved run.
  returned: mode report
  type: list
  elements: str
files:
  description: O(mode=report) - the files written (the page first), none in check mode.
  returned: mode report
  type: list
  elements: str
page:
  description: O(mode=report) - path of the HTML page of the run.
  returned: mode report
  type: str
"""

import json
import os
import re
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import secrets
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import bench_gate, bench_kv, bench_load, bench_report, \
    bench_vllm

RUN_ID = re.compile(r'^[0-9]{8}T[0-9]{6}Z$')
RUN_FILE = re.compile(r'^([0-9]{8}T[0-9]{6}Z)\.json$')
VLLM_TOOL = 'vllm bench serve'


def validate(p):
    """Error text for parameters that cannot describe a run, or None."""
    if p['mode'] == 'run':
        if not p['url'] or not p['model']:
            return 'mode=run needs url (the proxy, http://ADDRESS:PORT) and model'
        for name, low in (('count', 1), ('warmup', 0), ('input_len', 1), ('output_len', 2), ('concurrency', 0)):
            if p[name] < low:
                return '%s=%s must be at least %d' % (name, p[name], low)
        if p['rate'] < 0 or p['timeout'] <= 0:
            return 'rate must be >= 0 and timeout above 0, got rate=%s timeout=%s' % (p['rate'], p['timeout'])
        if not p['rate'] and not p['concurrency']:
            return 'set rate (requests/s) or concurrency (requests in flight): without either the load has no bound'
        if bench_load.split_url(p['url']) is None:
            return 'url=%s is not http://ADDRESS:PORT' % p['url']
    elif not p['results_dir'] or not p['run_id'] or not RUN_ID.match(p['run_id']):
        return 'mode=report needs results_dir and run_id (YYYYmmddTHHMMSSZ), got %r and %r' % (
            p['results_dir'], p['run_id'])
    return None


def _vllm_flags(module, binary):
    """The flags of `vllm bench serve` on this host, or (None, why) when it has none. vLLM's parser lists its flags
    only for --help=all (plain --help prints the group titles, vllm/utils/argparse_utils.py format_help); a release
    that refuses --help=all lists them for --help."""
    why = ''
    for option in bench_vllm.HELP_OPTIONS:
        try:
            rc, out, err = module.run_command([binary, 'bench', 'serve', option])
        except OSError as e:  # the binary does not exist
            return None, '%s: %s' % (binary, e)
        if rc == 0:
            return bench_vllm.help_flags(out), ''
        lines = (err or out).strip().splitlines()
        why = '%s bench serve %s: rc %d %s' % (binary, option, rc, lines[-1] if lines else '')
    return None, why


def _run_vllm(module, spec, flags, key):
    tmp = tempfile.mkdtemp(prefix='vllm-pd-bench-')
    try:
        cmd = bench_vllm.argv(module.params['vllm_binary'], spec, flags, tmp, 'result.json')
        # vllm bench serve sends OPENAI_API_KEY as the Bearer token (benchmarks/lib/endpoint_request_func.py)
        rc, out, err = module.run_command(cmd, environ_update={secrets.PROXY_KEY: key} if key else None)
        path = os.path.join(tmp, 'result.json')
        if rc != 0 or not os.path.exists(path):
            module.fail_json(msg='%s failed (rc %d) through the proxy %s: %s' % (
                VLLM_TOOL, rc, module.params['url'], ((err or '') + (out or '')).strip()[-1500:]), argv=cmd)
        with open(path) as f:
            return cmd, bench_vllm.normalize(json.load(f), spec['count'])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_mode(module):
    p = module.params
    spec = bench_load.spec_of(p)
    load = bench_load.load_of(p)
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg='check mode: no load sent', load=load)
    try:
        key = secrets.api_key_of_file(p['api_key_file']) if p['api_key_file'] else ''
    except (IOError, OSError) as exc:
        module.fail_json(msg='cannot read the API key from %s: %s. Fix: run as root (the file is 0600) or rerun '
                             'deploy_pd.yml to write it' % (p['api_key_file'], exc.strerror))
    if key:
        # Ansible masks a no_log value wherever it would show it (the result, a failure message)
        module.no_log_values.add(key)
    flags, note = None, ''
    if p['tool'] in ('auto', 'vllm'):
        flags, note = _vllm_flags(module, p['vllm_binary'])
        missing = bench_vllm.missing_flags(flags, p['concurrency']) if flags is not None else []
        if missing:
            flags, note = None, '%s lacks %s' % (VLLM_TOOL, ', '.join(missing))
        note = 'built-in load generator: %s' % note if note else ''
        if flags is None and p['tool'] == 'vllm':
            module.fail_json(msg='tool=vllm, but %s cannot run here: %s. Fix: install a vLLM with `vllm bench serve` '
                                 'on the proxy host, or set vllm_pd_bench_tool: loadgen' % (VLLM_TOOL, note))
    if flags is not None:
        cmd, result = _run_vllm(module, spec, flags, key)
        tool = VLLM_TOOL
    else:
        cmd, result, tool = [], bench_load.run_builtin(spec, p['count'], key), 'loadgen'
    load['tool'] = tool
    module.exit_json(changed=False, tool=tool, tool_note=note, argv=cmd, load=load, result=result)


def _read(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return None


def _previous(cluster_dir, run_id):
    """The last saved run of the cluster before RUN_ID, or None."""
    names = sorted(m.group(1) for m in (RUN_FILE.match(n) for n in (
        os.listdir(cluster_dir) if os.path.isdir(cluster_dir) else [])) if m and m.group(1) < run_id)
    return _read(os.path.join(cluster_dir, names[-1] + '.json')) if names else None


def _write(path, text):
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.makedirs(d)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write(text)
    os.rename(tmp, path)


def report_mode(module):
    p = module.params
    root, run_id = p['results_dir'], p['run_id']
    records, table, files, notes_out = [], [], [], []
    for c in p['clusters']:
        cluster_dir = os.path.join(root, str(c['cluster']))
        run = c['run']
        logs = c.get('decode_logs') or []
        pairs = bench_kv.pair_times(logs, c.get('prefill_by_address') or {})
        notes = [n for n in (run.get('tool_note'), bench_kv.idle_note(bench_kv.idle(logs, pairs))) if n]
        rec = bench_gate.make_record(run_id, str(c['cluster']), c['proxy'], run['tool'], run['load'], run['result'],
                                     pairs, bench_kv.unseen(logs, pairs),
                                     _read(os.path.join(cluster_dir, 'baseline.json')), c.get('settings') or {}, notes)
        records.append(rec)
        table += bench_gate.comparison(rec, _previous(cluster_dir, run_id)) + ['']
    page = os.path.join(root, run_id + '.html')
    if not module.check_mode:
        _write(page, bench_report.render_html(run_id, records))
        files.append(page)
        for rec in records:
            text = json.dumps(rec, indent=1, sort_keys=True)
            path = os.path.join(root, rec['cluster'], run_id + '.json')
            _write(path, text)
            files.append(path)
            if p['save_baseline']:
                if rec['result']['failed']:
                    notes_out.append('cluster %s: not saved as baseline, %d requests failed' % (
                        rec['cluster'], rec['result']['failed']))
                else:
                    _write(os.path.join(root, rec['cluster'], 'baseline.json'), text)
                    files.append(os.path.join(root, rec['cluster'], 'baseline.json'))
    found = [f for rec in records for f in rec['findings']]
    module.exit_json(changed=bool(files), records=records, findings=found, files=files, page=page,
                     failing_clusters=[r['cluster'] for r in records if not r['passed']],
                     table=table + notes_out)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type='str', choices=['run', 'report'], required=True),
            url=dict(type='str'), endpoint=dict(type='str', default='/v1/completions'),
            model=dict(type='str'), served_model_name=dict(type='str', default=''),
            input_len=dict(type='int', default=128), output_len=dict(type='int', default=64),
            count=dict(type='int', default=100), warmup=dict(type='int', default=0),
            rate=dict(type='float', default=0), concurrency=dict(type='int', default=0),
            timeout=dict(type='float', default=60), tool=dict(type='str', choices=['auto', 'vllm', 'loadgen'], default='auto'),
            vllm_binary=dict(type='str', default='vllm'), seed=dict(type='int', default=0),
            api_key_file=dict(type='path'),
            clusters=dict(type='list', elements='dict', default=[]),
            results_dir=dict(type='path'), run_id=dict(type='str'), save_baseline=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    err = validate(module.params)
    if err:
        module.fail_json(msg=err)
    if module.params['mode'] == 'run':
        run_mode(module)
    report_mode(module)


if __name__ == '__main__':
    main()
