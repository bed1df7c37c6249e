# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm-ascend releases this collection knows, as data: one table, read by every role and module.

Every fact in RELEASES is about that release's own source distribution (vllm-ascend, the vLLM it pins,
the Mooncake it is built with) and is asserted against that source by tests/contract (fetched with
scripts/fetch-upstream and cached). shared/docs/upstream-compat.md has the file and line of each.

Versions compare as PEP 440 versions: ``0.23.0.post1`` is a 0.23.0 for the CANN check, ``v0.18.0`` and
``0.18.0`` are the same release. parse_version is the collection's one version parser: the release table,
the inventory's vllm_pd_vllm_ascend_version rule and the abort-timeout name (inventory/engine_env.py) all read
versions with it; a release has at least two numbers (``18`` is none). The table is keyed by the exact release pip installs; a version that is
not a key is looked up by its base release (``find``) only where a fact does not depend on the post
release (the CANN it is built with).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# PEP 440 subset that vllm-ascend and vLLM releases use: N.N[.N...][{a,b,rc}N][.postN][.devN][+local]
_PEP440 = re.compile(r'^v?(?P<release>\d+(?:\.\d+)+)'
                     r'(?:[-_.]?(?P<pre>a|b|rc)(?P<pre_n>\d*))?'
                     r'(?:[-_.]?post(?P<post>\d*))?'
                     r'(?:[-_.]?dev(?P<dev>\d*))?'
                     r'(?:\+(?P<local>[a-z0-9.]+))?$', re.IGNORECASE)
_PRE_RANK = {'a': 0, 'b': 1, 'rc': 2}

UNSUPPORTED_RELEASE = 'UnsupportedRelease'
RELEASE_MISMATCH = 'ReleaseMismatch'

# Metric names every supported release exports (vLLM v1/metrics/loggers.py); per release extras below.
_METRICS_COMMON = (
    'vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc',
    'vllm:request_success_total', 'vllm:prompt_tokens_total', 'vllm:generation_tokens_total',
    'vllm:time_to_first_token_seconds', 'vllm:inter_token_latency_seconds',
    'vllm:e2e_request_latency_seconds',
)
_PROXY_PATH = 'examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py'
_PROXY_FLAGS = ('--host', '--port', '--prefiller-hosts', '--prefiller-ports', '--decoder-hosts',
                '--decoder-ports', '--max-retries', '--retry-delay')
# the proxy options the proxy role renders (the example proxy's and the Mooncake wheel's proxy have each)
_PROXY_ARGV_FLAGS = dict(host='--host', port='--port', prefiller_hosts='--prefiller-hosts',
                         prefiller_ports='--prefiller-ports', decoder_hosts='--decoder-hosts', decoder_ports='--decoder-ports')
_PROXY_WAIT = dict(retries='--max-waiting-retries', interval='--waiting-retry-interval')
_PROXY_WAIT_FLAGS = (_PROXY_WAIT['retries'], _PROXY_WAIT['interval'])
_PROXY_HEALTH = '/healthcheck'
_COMPLETIONS = '/v1/completions'
_PROXY_ROUTES = (_COMPLETIONS, '/v1/chat/completions', _PROXY_HEALTH)
_ADMIN_ADD, _ADMIN_REMOVE = '/instances/add', '/instances/remove'
_ADMIN_ROUTES = (_ADMIN_ADD, _ADMIN_REMOVE)
_ADMIN_REQUEST = dict(kind='type', members='instances')
_ADMIN_ANSWER = dict(prefill='current_prefill_instances', decode='current_decode_instances')
_KV_LINE_HEAD = 'KV cache transfer for request'
_KV_LINE_TOOK = (_KV_LINE_HEAD + ' %s took %.2f ms. '
                 'local_ip %s local_device_id %s remote_session_id %s')
_KV_LINE_GROUPS = (_KV_LINE_HEAD + ' %s took %.2f ms (%d groups, %d blocks). '
                   'local_ip %s local_device_id %s remote_session_id %s')
# Facts the same in every release of the table (tests/contract asserts each against every release's source).
_SERVE_FLAGS = dict(host='--host', port='--port', tensor_parallel_size='--tensor-parallel-size',
                    data_parallel_size='--data-parallel-size', data_parallel_address='--data-parallel-address',
                    data_parallel_rpc_port='--data-parallel-rpc-port', kv_transfer_config='--kv-transfer-config',
                    shutdown_timeout='--shutdown-timeout',
                    # the plan's (filter pd_instances, inventory/parallel.py), the P/D settings' (model/pd_consistency.py),
                    # and those the doctor reads back (doctor/doctor_launch.py) or the inventory refuses (rules_runtime.py)
                    data_parallel_rank='--data-parallel-rank', data_parallel_size_local='--data-parallel-size-local',
                    pipeline_parallel_size='--pipeline-parallel-size',
                    prefill_context_parallel_size='--prefill-context-parallel-size', model='--model',
                    served_model_name='--served-model-name', dtype='--dtype', kv_cache_dtype='--kv-cache-dtype',
                    block_size='--block-size', max_model_len='--max-model-len', quantization='--quantization',
                    speculative_config='--speculative-config', api_key='--api-key')
# the short spelling vLLM's argparse gives some of them (serve_flags name -> alias): what the parsers also accept
_SERVE_ALIASES = dict(tensor_parallel_size='-tp', pipeline_parallel_size='-pp', prefill_context_parallel_size='-pcp',
                      quantization='-q')
# the `vllm bench serve` options the benchmark passes (verify/bench_vllm.py; vLLM benchmarks/serve.py)
_BENCH_FLAGS = dict(backend='--backend', host='--host', port='--port', endpoint='--endpoint', model='--model',
                    dataset_name='--dataset-name', random_input_len='--random-input-len',
                    random_output_len='--random-output-len', num_prompts='--num-prompts', request_rate='--request-rate',
                    percentile_metrics='--percentile-metrics', metric_percentiles='--metric-percentiles',
                    save_result='--save-result', result_dir='--result-dir', result_filename='--result-filename',
                    max_concurrency='--max-concurrency', served_model_name='--served-model-name',
                    ignore_eos='--ignore-eos', seed='--seed', save_detailed='--save-detailed', disable_tqdm='--disable-tqdm')
# the values the benchmark gives `vllm bench serve`: its backend (the OpenAI completions client), its dataset (random
# prompts of a given length) and the latencies it asks percentiles of (each a mean_<name>_ms of its result)
_BENCH_VALUES = dict(backend='openai', dataset_name='random', percentile_metrics=('ttft', 'tpot', 'itl', 'e2el'))
# the keys of the result file of `vllm bench serve` the benchmark reads (benchmarks/serve.py's result dict; a
# %s key is one per percentile metric); bench_result_missing names those a release does not write
_BENCH_RESULT_KEYS = dict(completed='completed', failed='failed', errors='errors', duration='duration',
                          request_throughput='request_throughput', output_throughput='output_throughput',
                          total_output_tokens='total_output_tokens', ttfts='ttfts', itls='itls', output_lens='output_lens',
                          mean='mean_%s_ms', median='median_%s_ms', p50='p50_%s_ms', p90='p90_%s_ms', p99='p99_%s_ms')
_KV_CONFIG_KEYS = dict(connector='kv_connector', role='kv_role', port='kv_port', extra_config='kv_connector_extra_config')
_KV_ROLES = dict(prefill='kv_producer', decode='kv_consumer')
_ENGINE_ENV = dict(hccl_if_ip='HCCL_IF_IP', gloo_socket_ifname='GLOO_SOCKET_IFNAME', tp_socket_ifname='TP_SOCKET_IFNAME',
                   hccl_socket_ifname='HCCL_SOCKET_IFNAME', visible_devices='ASCEND_RT_VISIBLE_DEVICES')
_ENGINE_ROUTES = dict(health='/health', models='/v1/models', metrics='/metrics', completions=_COMPLETIONS)
# Variables of the user's engine env (vllm_pd_engine_env, prefill_env, decode_env) the checks read; the roles render
# none of them. The port windows the Ascend transports bind from (common/port_windows.py): ADXL's base (Mooncake's
# Ascend transport), the Transfer Engine's RPC range (Mooncake reads MC_*_RPC_PORT, and its misspelled MC_*_PRC_PORT,
# the only one v0.3.9 reads: both honoured, the correct spelling first) and HCCL's first listen port.
_WINDOW_ENV = dict(adxl_base='ASCEND_BASE_PORT', te_rpc_min=('MC_MIN_RPC_PORT', 'MC_MIN_PRC_PORT'),
                   te_rpc_max=('MC_MAX_RPC_PORT', 'MC_MAX_PRC_PORT'), hccl_base='HCCL_IF_BASE_PORT')
_INTRA_ROCE = 'HCCL_INTRA_ROCE_ENABLE'
# RoCE between P and D must use the same transport, retransmit timing and traffic class/service level
# (model/pd_consistency.py)
_PD_MATCH_ENV = (_INTRA_ROCE, 'HCCL_RDMA_TIMEOUT', 'HCCL_RDMA_RETRY_CNT', 'HCCL_RDMA_TC', 'HCCL_RDMA_SL')
# The transfer-timeout rule's variables (inventory/engine_env.py), read by vllm-ascend's get_transfer_timeout_value:
# its transfer timeout (ms) and the RDMA retransmission timeout exponent and count (also read by CANN HCCL)
_TRANSFER_TIMEOUT_ENV = dict(transfer='ASCEND_TRANSFER_TIMEOUT', rdma_timeout='HCCL_RDMA_TIMEOUT',
                             rdma_retry='HCCL_RDMA_RETRY_CNT')
# The vllm: metrics the doctor's latency page and the benchmark read, by role: a name, or a fallback chain (names it
# has had, newest first; the first one an engine exports is read: vLLM 0.11 deprecated time_per_output_token)
_METRIC_NAMES = dict(ttft='vllm:time_to_first_token_seconds',
                     itl=('vllm:inter_token_latency_seconds', 'vllm:time_per_output_token_seconds'),
                     e2el='vllm:e2e_request_latency_seconds', request_success='vllm:request_success_total')
# The OpenAI completion request the smoke test (verify/smoke.py), the rolling proof (proxy_member.py) and the load
# generator (verify/loadgen.py) send, by role: fields of vLLM's CompletionRequest (entrypoints/openai[/completion]/
# protocol.py). kv_transfer_params is also what the example proxy sets on the prefill request and reads from its answer.
_COMPLETION_REQUEST = dict(model='model', prompt='prompt', max_tokens='max_tokens', min_tokens='min_tokens',
                           temperature='temperature', stream='stream', ignore_eos='ignore_eos',
                           kv_transfer_params='kv_transfer_params')
# what they read of its answer: CompletionResponse's id, choices and usage, a choice's text (CompletionResponseChoice,
# CompletionResponseStreamChoice), UsageInfo's completion_tokens, CompletionResponse's kv_transfer_params, an error
# answer's or event's error (ErrorResponse) and, for a chat stream, a choice's delta and its content (DeltaMessage)
_COMPLETION_ANSWER = dict(id='id', choices='choices', text='text', usage='usage', completion_tokens='completion_tokens',
                          kv_transfer_params='kv_transfer_params', error='error', delta='delta', content='content')
# the server-sent events of a streamed answer: each a `data:` line, the last one `data: [DONE]`
# the request-id header: vLLM's OpenAI server builds its request id from it (_base_request_id), and the example proxy
# sends its own in it to P and D (replacing the client's)
_REQUEST_ID_HEADER = 'X-Request-Id'
_COMPLETION_STREAM = dict(data='data:', done='[DONE]')
# what the example proxy sets on the request it sends P (its constant values; 0.18.0 and older also pass the aborted
# requests): P computes one token and keeps the KV for D, then D gets P's answer's kv_transfer_params
_PROXY_PREFILL_REQUEST = dict(kv_transfer_params=dict(do_remote_decode=True, do_remote_prefill=False, remote_engine_id=None,
                                                      remote_block_ids=None, remote_host=None, remote_port=None),
                              stream=False, max_tokens=1, min_tokens=1)
_MCV_P2P = 'vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector'
_MCV_OLD = 'vllm_ascend.distributed.mooncake_connector'


def _release(**facts):
    base = dict(
        connector='MooncakeConnectorV1',
        # the variable vLLM's get_ip() reads: the address the engine binds and advertises (the env file sets it)
        host_ip_env='VLLM_HOST_IP',
        # the version of the Mooncake wheel the release's image installs (None: built from source); its
        # mooncake-transfer-engine-non-cuda build (same Python code) is what scripts/fetch-upstream reads
        mooncake_wheel=None,
        # the proxy module of the Mooncake wheel, the proxy role's default (python -m; tests/contract finds it in the
        # wheel of every release that pins one)
        wheel_proxy_module='mooncake.vllm_v1_proxy_server',
        proxy_path=_PROXY_PATH,
        proxy_flags=_PROXY_FLAGS + _PROXY_WAIT_FLAGS,
        proxy_argv_flags=_PROXY_ARGV_FLAGS,
        proxy_routes=_PROXY_ROUTES + _ADMIN_ROUTES,
        proxy_healthcheck_keys=('status', 'prefill_instances', 'decode_instances'),
        # per member kind, the /healthcheck key that counts the members the proxy lists (the example proxy's and the
        # Mooncake wheel's): a restarted process of the proxy tier is ready once both equal the members it was given
        proxy_member_counts=dict(prefill='prefill_instances', decode='decode_instances'),
        # the routes the roles call: the health probe and the admin add (an add of no instance lists the members)
        proxy_health_route=_PROXY_HEALTH,
        proxy_add_route=_ADMIN_ADD,
        proxy_remove_route=_ADMIN_REMOVE,
        # the admin API's JSON: the request's keys (the member kind, a list of host:port), per kind the key of the
        # members its answer lists, and the key of its refusal (None: a proxy without the admin API)
        proxy_admin_request=_ADMIN_REQUEST,
        proxy_admin_answer=_ADMIN_ANSWER,
        proxy_admin_error='error',
        # the route the smoke test sends its request to (the proxy's, as the engine's: engine_routes)
        proxy_completions_route=_COMPLETIONS,
        # the completion request's keys, the keys read of its answer, and the request-id header (vLLM's OpenAI
        # protocol; the example proxy sends the header)
        completion_request=_COMPLETION_REQUEST,
        completion_answer=_COMPLETION_ANSWER,
        request_id_header=_REQUEST_ID_HEADER,
        completion_stream=_COMPLETION_STREAM,
        # the keys and values the example proxy sets on its prefill request (the rolling proof sends P the same)
        proxy_prefill_request=_PROXY_PREFILL_REQUEST,
        # the proxy-global count of requests in flight (an attribute of its state; a /healthcheck key where listed)
        proxy_count_key='request_num',
        # the options of the admin API's listener (its probes of an added member: how many, how far apart) that
        # proxy_member.py reads from the running proxy's command line (None: a proxy without the admin API)
        proxy_wait_flags=_PROXY_WAIT,
        # the option of `vllm serve` / `vllm bench serve` that lists every flag
        cli_lists_flags='--help=all',
        kv_log_level='INFO',
        # the start of the KV transfer line, what the doctor, the benchmark and the smoke grep the journal for
        kv_log_grep=_KV_LINE_HEAD,
        metrics=_METRICS_COMMON,
        # the metrics the doctor and the benchmark read, by role (a name or a fallback chain, newest first)
        metric_names=_METRIC_NAMES,
        # the gauges of requests running and waiting on an engine: what the drain probes and proxy_member.py read
        busy_gauges=_METRICS_COMMON[:2],
        # the counter of requests an engine finished: proxy_member.py names a leaked proxy count only while it stays
        # still on every member (steady traffic moves it between reads that found every member idle)
        served_counter=_METRICS_COMMON[3],
        # kv_connector_extra_config keys the connector reads (prefill/decode sub-dicts).
        extra_config_keys=('prefill.tp_size', 'prefill.dp_size', 'prefill.pp_size', 'prefill.pp_layer_partition',
                           'decode.tp_size', 'decode.dp_size', 'decode.pp_size'),
        # the `vllm serve` options the collection renders or reads (vLLM engine/arg_utils.py, entrypoints/openai/cli_args.py;
        # --prefill-context-parallel-size from 0.13: the plan refuses pcp > 1 where port_terms lacks pcp), the short
        # spellings of some, and the `vllm bench serve` options the benchmark passes
        serve_flags=_SERVE_FLAGS,
        serve_aliases=_SERVE_ALIASES,
        bench_flags=_BENCH_FLAGS,
        bench_values=_BENCH_VALUES,
        bench_result_keys=_BENCH_RESULT_KEYS,
        # the kv-transfer-config fields the engine role renders (vLLM KVTransferConfig) and its kv_role values
        kv_config_keys=_KV_CONFIG_KEYS,
        kv_roles=_KV_ROLES,
        # what the engine env file sets besides host_ip_env, read by native code (CANN HCCL and runtime, torch
        # gloo and TensorPipe), not by vLLM's Python: tests/contract NATIVE_ENV says which reads each
        engine_env_names=_ENGINE_ENV,
        # variables of the user's engine env the checks read (tests/contract: read by vLLM's or vllm-ascend's Python,
        # or by the native code NATIVE_ENV and MOONCAKE_ENV name): the port-window variables, the ones P and D must
        # set alike, the one that sends KV of P and D on one host over RoCE, vLLM's API key and CANN's log directory
        window_env=_WINDOW_ENV,
        pd_match_env=_PD_MATCH_ENV,
        transfer_timeout_env=_TRANSFER_TIMEOUT_ENV,
        intra_roce_env=_INTRA_ROCE,
        api_key_env='VLLM_API_KEY',
        # the variable the example proxy reads the key it sends P and D as its Bearer token from (the proxy role's
        # env file sets it; `vllm bench serve` reads the same one)
        proxy_api_key_env='OPENAI_API_KEY',
        log_path_env='ASCEND_PROCESS_LOG_PATH',
        # the engine's own routes the roles call (vLLM's OpenAI server; /metrics is its Prometheus mount)
        engine_routes=_ENGINE_ROUTES,
        # keys of the `vllm bench serve` result file (benchmarks/serve.py) the benchmark reads that it lacks
        bench_result_missing=(),
    )
    base.update(facts)
    return base


# 0.23.0.post1 differs from 0.23.0 only by a log handler in its image: the same proxy, connector and patches.
_V023 = _release(
    status='supported', vllm='0.23.0', mooncake='0.3.11.post1', mooncake_wheel='0.3.11.post1', cann='9.1.0',
    python=('3.10', '3.13'), connector_module=_MCV_P2P, port_terms=('tp', 'pp', 'pcp'), pp_pcp='both',
    proxy_python='3.10', proxy_imports=('fastapi', 'httpx', 'uvicorn'),
    proxy_remove='taint_until_idle', proxy_readd='noop',
    proxy_flags=_PROXY_FLAGS + _PROXY_WAIT_FLAGS + ('--workers', '--log-level'),
    proxy_routes=_PROXY_ROUTES + _ADMIN_ROUTES + ('/reset_prefix_cache',),
    proxy_healthcheck_keys=('status', 'prefill_instances', 'decode_instances', 'request_num'),
    shutdown_timeout=True, abort_env='VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT', abort_default=480,
    kv_log=_KV_LINE_TOOK, dense_dp_keeps_rank='VLLM_ASCEND_BALANCE_SCHEDULING')


# status: 'supported' - deployed and checked; 'refused' - UnsupportedRelease names `reason`.
# port_terms: the parallel sizes in the side channel port formula (connector): DP stride tp*pp*pcp and the
#   worker offset (pp_rank*pcp + pcp_rank)*tp + tp_rank; 'tp' alone = kv_port + dp_rank*tp + tp_rank.
# pp_pcp: 'both' - pp and pcp may be combined; 'exclusive' - one of them > 1 at most; 'none' - neither.
# proxy_remove: how the example proxy removes a member under load - 'taint_until_idle' (listed and tainted until
#   its global request count is 0), 'taint_while_prefill' (same, but the count covers only the P phase),
#   'immediate' (dropped and renumbered at once: in-flight requests of other members can fail).
# proxy_readd: what an add of a listed, tainted member does - 'noop' (stays tainted), 'untaint'.
# dense_dp_keeps_rank: whether each DP rank of a dense (non-MoE) model keeps its data_parallel_rank (so binds
#   kv_port + rank*tp*pp*pcp as MoE does): True, False (vLLM resets it to 0), or the name of the engine
#   environment variable that makes it True when set to 1 (0.23: the balance-scheduling patch is always imported,
#   but its launcher falls back to vLLM's unless balance scheduling is on; its additional_config switch
#   enable_balance_scheduling is not read here, so the plan may refuse a dense internal DP it would run).
# proxy_python: the oldest Python the example proxy itself runs on (its grammar and annotations evaluated at
#   run time; 3.7 at least, asyncio.create_task); a proxy that imports vllm.logger needs vLLM's Python too.
# All these are checked against the release's own source by tests/contract (section k).
RELEASES = {
    '0.23.0.post1': _V023,
    '0.23.0': _V023,
    '0.18.0': _release(
        status='supported', vllm='0.18.0', mooncake='0.3.9', cann='8.5.1', python=('3.10', '3.12'),
        connector_module=_MCV_P2P, port_terms=('tp', 'pp', 'pcp'), pp_pcp='exclusive',
        proxy_python='3.9', proxy_imports=('fastapi', 'httpx', 'uvicorn'),
        proxy_remove='taint_while_prefill', proxy_readd='untaint',
        shutdown_timeout=True, abort_env='VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT', abort_default=480,
        kv_log=_KV_LINE_GROUPS, dense_dp_keeps_rank='VLLM_ASCEND_BALANCE_SCHEDULING'),
    '0.13.0': _release(
        status='refused',
        reason='its example proxy removes a member at once and renumbers the rest, so requests in flight on '
               'other members fail during any membership change, and it imports vLLM itself',
        vllm='0.13.0', mooncake='0.3.7.post2', cann='8.5.0', python=('3.10', '3.12'),
        connector_module=_MCV_OLD, port_terms=('tp', 'pp', 'pcp'), pp_pcp='exclusive',
        proxy_python='3.7', proxy_imports=('fastapi', 'httpx', 'uvicorn', 'vllm.logger'),
        proxy_remove='immediate', proxy_readd='add',
        shutdown_timeout=False, abort_env='VLLM_NIXL_ABORT_REQUEST_TIMEOUT', abort_default=480,
        kv_log=_KV_LINE_GROUPS, dense_dp_keeps_rank=True),
    '0.11.0': _release(
        status='refused',
        reason='its example proxy has no /instances admin API and its connector has no pipeline or context '
               'parallel terms in the port formula',
        vllm='0.11.0', mooncake='0.3.7.post2', cann='8.3.RC2', python=('3.9', '3.12'),
        connector_module=_MCV_OLD, port_terms=('tp',), pp_pcp='none',
        proxy_flags=_PROXY_FLAGS, proxy_routes=_PROXY_ROUTES, proxy_wait_flags=None, proxy_admin_request=None,
        proxy_admin_answer=None, proxy_admin_error=None,
        extra_config_keys=('prefill.tp_size', 'prefill.dp_size', 'decode.tp_size', 'decode.dp_size', 'use_ascend_direct'),
        bench_result_missing=('failed',),
        proxy_python='3.7', proxy_imports=('fastapi', 'httpx', 'uvicorn', 'vllm.logger'),
        proxy_remove=None, proxy_readd=None,
        shutdown_timeout=False, abort_env='VLLM_NIXL_ABORT_REQUEST_TIMEOUT', abort_default=120,
        kv_log=_KV_LINE_GROUPS, dense_dp_keeps_rank=True),
}
# Release candidates: known CANN only (versioning_policy.md); refused, since no contract test reads them.
RELEASE_CANDIDATES_CANN = {
    '0.23.0rc1': '9.0.1',
    '0.22.1rc1': '9.0.0',
    '0.21.0rc1': '9.0.0',
    '0.20.2rc1': '9.0.0',
    '0.19.1rc1': '8.5.1',
}


def parse_version(text):
    """PEP 440 sort key of TEXT ('v' prefix allowed): (release tuple without trailing zeros, pre, post, dev).

    ValueError if TEXT is not a version of at least two numbers (N.N)."""
    m = _match(text)
    release = [int(p) for p in m.group('release').split('.')]
    while len(release) > 1 and release[-1] == 0:
        release.pop()  # 0.18 == 0.18.0 == 0.18.0.0 (PEP 440: trailing zeros do not count)
    dev = m.group('dev')
    pre = m.group('pre')
    post = m.group('post')
    # a dev release sorts before its pre and final release; a pre before the final
    if pre:
        pre_key = (_PRE_RANK[pre.lower()], int(m.group('pre_n') or 0))
    else:
        pre_key = (-1, 0) if dev is not None and post is None else (3, 0)
    post_key = int(post or 0) if post is not None else -1
    dev_key = int(dev or 0) if dev is not None else float('inf')
    return (tuple(release), pre_key, post_key, dev_key)


def _match(text):
    m = _PEP440.match(str(text).strip())
    if not m:
        raise ValueError('%r is not a vllm-ascend release (not a release version such as v0.23.0, 0.23.0.post1 or v0.18.0rc1)'
                         % (text,))
    return m


def _release_and_pre(m):
    out = '.'.join(str(int(p)) for p in m.group('release').split('.'))
    if m.group('pre'):
        out += m.group('pre').lower() + str(int(m.group('pre_n') or 0))
    return out


def normalize(text):
    """Canonical spelling: 'v0.18.0' -> '0.18.0', '0.23.0-post1' -> '0.23.0.post1'."""
    m = _match(text)
    out = _release_and_pre(m)
    if m.group('post') is not None:
        out += '.post' + str(int(m.group('post') or 0))
    if m.group('dev') is not None:
        out += '.dev' + str(int(m.group('dev') or 0))
    return out


def base_release(text):
    """The final release TEXT belongs to: '0.23.0.post1' -> '0.23.0' (pre releases keep their tag)."""
    return _release_and_pre(_match(text))


def find(version):
    """The table entry of VERSION (exact release first, else its base release), or None."""
    key = normalize(version)
    if key in RELEASES:
        return RELEASES[key]
    return RELEASES.get(base_release(key))


def runtime(version):
    """The facts the roles and plugins talk to upstream with for VERSION: its entry, else (no version, a version
    the table does not know or cannot parse) the newest supported release's."""
    try:
        entry = find(version) if version else None
    except ValueError:
        entry = None
    return entry or RELEASES[supported_versions()[0]]


def serve_spellings(name, version=None):
    """The spellings `vllm serve` of VERSION accepts for its serve_flags option NAME: the option, then its aliases."""
    facts = runtime(version)
    return (facts['serve_flags'][name],) + ((facts['serve_aliases'][name],) if name in facts['serve_aliases'] else ())


def supported_versions():
    """The supported releases, newest first."""
    return sorted((v for v, r in RELEASES.items() if r['status'] == 'supported'), key=parse_version, reverse=True)


def cann_for(version):
    """The CANN VERSION is built with (None when the table does not know it)."""
    entry = find(version)
    if entry:
        return entry['cann']
    return RELEASE_CANDIDATES_CANN.get(base_release(normalize(version)))


def support_problem(version):
    """None when VERSION is a supported release, else why not (one sentence, with the fix)."""
    try:
        key = normalize(version)
    except ValueError as exc:
        return '%s. Fix: give the version that `pip show vllm-ascend` prints' % exc
    entry = RELEASES.get(key)
    supported = ', '.join(supported_versions())
    if entry is None:
        return ('vllm-ascend %s is not a release this collection was checked against (supported: %s). Fix: install '
                'one of them, or add the release to plugins/module_utils/common/releases.py with its contract tests'
                % (key, supported))
    if entry['status'] != 'supported':
        return 'vllm-ascend %s is refused: %s. Fix: install one of %s' % (key, entry['reason'], supported)
    return None


def abort_env(version):
    """The abort-timeout variable the Mooncake connector of VERSION reads, or None when the table does not know it."""
    entry = find(version)
    return entry['abort_env'] if entry else None


def serve_has_shutdown_timeout(vllm_ascend, vllm):
    """Whether `vllm serve` of an engine whose Python has vllm-ascend VLLM_ASCEND and vLLM VLLM (as read there) has
    --shutdown-timeout, by the table: True or False for a supported release next to the vLLM it is built for, None
    otherwise (a release read as nothing, unknown, refused or beside another vLLM: the roles read `vllm serve`'s help).
    tests/contract checks each entry's shutdown_timeout against that vLLM's own options."""
    try:
        if not vllm_ascend or not vllm or support_problem(vllm_ascend):
            return None
        entry = RELEASES[normalize(vllm_ascend)]
        same = base_release(normalize(vllm)) == base_release(entry['vllm'])
    except ValueError:
        return None
    return entry['shutdown_timeout'] if same else None


def dense_dp_keeps_rank(version, env=None):
    """Whether each DP rank of a dense model keeps its data_parallel_rank under VERSION with the engine
    environment ENV (so it binds kv_port + rank*tp*pp*pcp, as MoE does). False for an unknown release: vLLM's
    own rule (v1/engine/core.py resets a non-MoE rank to 0)."""
    entry = find(version) if version else None
    if not entry:
        return False
    keeps = entry['dense_dp_keeps_rank']
    if isinstance(keeps, bool):
        return keeps
    # the name of the variable whose "1" makes vllm-ascend import its balance-scheduling patch (envs.py: int())
    value = str((env or {}).get(keeps, '0')).strip()
    return value.isdigit() and int(value) != 0


def _engine_where(e):
    return 'host %s %s' % (e.get('host', '?'), e.get('kind', '?'))


def installed_findings(cluster, engines, inventory_version=None):
    """The release checks of one cluster: ENGINES is [{host, kind, vllm_ascend, vllm, python, error}] as the
    preflight read them in each engine's Python (error: why nothing could be read). INVENTORY_VERSION is
    vllm_pd_vllm_ascend_version (None or '' when not set).

    Returns [{name, message}] with name UnsupportedRelease (a host runs no supported release, or a vLLM the
    release is not built for) or ReleaseMismatch (P and D run different releases, or the inventory names
    another release than the hosts run)."""
    out = []
    head = 'cluster %s' % cluster
    by_release = {}
    for e in engines:
        where = _engine_where(e)
        py = ' (Python %s)' % e['python'] if e.get('python') else ''
        if e.get('error'):
            out.append(dict(name=UNSUPPORTED_RELEASE, message='[%s] %s, %s: the installed vllm-ascend could not be read: '
                            '%s. Fix: check vllm_pd_vllm_binary (and the engine image for the container runtime); the '
                            'preflight runs the Python of its #! line' % (UNSUPPORTED_RELEASE, head, where, e['error'])))
            continue
        version = e.get('vllm_ascend')
        if not version:
            out.append(dict(name=UNSUPPORTED_RELEASE, message='[%s] %s, %s: no vllm-ascend distribution in the engine\'s '
                            'Python%s, so vLLM would run without the Ascend plugin. Fix: install one of %s there' % (
                                UNSUPPORTED_RELEASE, head, where, py, ', '.join(supported_versions()))))
            continue
        try:
            key = normalize(version)
        except ValueError:
            key = str(version)
        by_release.setdefault(key, []).append(where)
        problem = support_problem(version)
        if problem:
            out.append(dict(name=UNSUPPORTED_RELEASE, message='[%s] %s, %s%s: %s' % (
                UNSUPPORTED_RELEASE, head, where, py, problem)))
            continue
        pinned = RELEASES[key]['vllm']
        have = e.get('vllm')
        try:
            same = have is not None and base_release(normalize(have)) == base_release(pinned)
        except ValueError:
            same = False
        if not same:
            out.append(dict(name=UNSUPPORTED_RELEASE, message='[%s] %s, %s%s: vllm-ascend %s is built for vLLM %s, but the '
                            'engine\'s Python has %s. Fix: install vLLM %s next to it' % (
                                UNSUPPORTED_RELEASE, head, where, py, key, pinned,
                                'vLLM %s' % have if have else 'no vLLM', pinned)))
    if len(by_release) > 1:
        runs = '; '.join('%s on %s' % (v, ', '.join(sorted(w))) for v, w in sorted(by_release.items()))
        out.append(dict(name=RELEASE_MISMATCH, message='[%s] %s: P and D must run one vllm-ascend release (the KV '
                        'connector, its log and its port formula differ between releases), but it runs %s. Fix: install '
                        'one release on every engine host of the cluster' % (RELEASE_MISMATCH, head, runs)))
    if inventory_version:
        try:
            want = normalize(inventory_version)
        except ValueError:
            want = None  # the inventory rule names a malformed value
        other = sorted((v, w) for v, w in by_release.items() if want and v != want)
        if other:
            out.append(dict(name=RELEASE_MISMATCH, message='[%s] %s: vllm_pd_vllm_ascend_version is %s, but %s. Fix: '
                            'correct vllm_pd_vllm_ascend_version, or remove it (the preflight reads the release), or '
                            'install %s' % (RELEASE_MISMATCH, head, want, '; '.join(
                                '%s runs %s' % (', '.join(sorted(w)), v) for v, w in other), want)))
    return out
