"""`vllm serve MODEL [options]` with vLLM's option names; unknown options are an error, as in vLLM."""
import argparse
import json
import os
import sys
import traceback

from . import api, config, logs, netinfo, release
from .engine import Engine

_log = logs.get("api_server.py:1931")
_core_log = logs.get("core.py:935")
_utils_log = logs.get("utils.py:1244")


def _version():
    return (release.installed("vllm") or "0.23.0") + "+lab"


def _parser(entry):
    p = argparse.ArgumentParser(prog="vllm", allow_abbrev=False)
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", allow_abbrev=False)
    s.add_argument("model")
    s.add_argument("--host", default=None)
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--served-model-name", nargs="+")
    s.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    s.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    s.add_argument("--prefill-context-parallel-size", "-pcp", type=int, default=1)
    s.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    s.add_argument("--data-parallel-size-local", "-dpl", type=int)
    s.add_argument("--data-parallel-rank", "-dpr", type=int)
    s.add_argument("--data-parallel-start-rank", "-dpn", type=int)
    s.add_argument("--data-parallel-address", "-dpa")
    s.add_argument("--data-parallel-rpc-port", "-dpp", type=int)
    s.add_argument("--data-parallel-backend", "-dpb", choices=("mp", "ray"))
    s.add_argument("--kv-transfer-config")
    for flag, kind in (("--max-model-len", int), ("--gpu-memory-utilization", float), ("--block-size", int),
                       ("--max-num-seqs", int), ("--max-num-batched-tokens", int), ("--seed", int),
                       ("--dtype", str), ("--quantization", str), ("--kv-cache-dtype", str), ("--additional-config", str),
                       ("--compilation-config", str), ("--tokenizer", str), ("--api-key", str),
                       ("--uvicorn-log-level", str), ("--distributed-executor-backend", str),
                       ("--speculative-config", str), ("--max-log-len", int)):
        s.add_argument(flag, type=kind)
    for flag in ("--trust-remote-code", "--enforce-eager", "--enable-expert-parallel", "--disable-log-stats",
                 "--enable-log-requests", "--headless"):
        s.add_argument(flag, action="store_true")
    s.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    # vLLM >= 0.18 [day2-ops §2a]: on SIGTERM new requests are refused, in-flight ones get this long;
    # 0 (the default) aborts them at once. An older release refuses the option (the release table).
    if entry["shutdown_timeout"]:
        s.add_argument("--shutdown-timeout", type=int, default=0)
    return p


def _local_dp(args):
    """Local DP ranks: external DP (--data-parallel-rank) runs one; otherwise start..start+local."""
    if args.data_parallel_rank is not None:
        start, local = args.data_parallel_rank, args.data_parallel_size_local or 1
    else:
        start = args.data_parallel_start_rank or 0
        local = args.data_parallel_size_local or args.data_parallel_size
    if start + local > args.data_parallel_size:
        raise config.ConfigError(f"data parallel ranks {start}..{start + local - 1} exceed "
                                 f"--data-parallel-size {args.data_parallel_size}")
    args.dp_rank_start, args.dp_size_local = start, local


def _fail(exc):
    _core_log.error("EngineCore failed to start.\n%s", "".join(traceback.format_exception(exc)).rstrip())
    _utils_log.error("Engine core initialization failed. See root cause above. Failed core proc(s): "
                     "{'EngineCore_DP0': 1}")
    return 1


def main(argv):
    logs.setup()
    # vLLM's parser prints every option for --help=all (plain --help prints groups since 0.10)
    entry = release.facts()
    args = _parser(entry).parse_args(["--help" if a == "--help=all" else a for a in argv])
    _log.info("vLLM API server version %s", _version())
    _log.info("non-default args: %s", {k: v for k, v in vars(args).items() if v not in (None, False)})
    env = dict(os.environ)
    try:
        if args.pipeline_parallel_size < 1 or args.prefill_context_parallel_size < 1:
            raise config.ConfigError("pipeline and prefill context parallel sizes must be >= 1")
        _local_dp(args)
        if not args.kv_transfer_config:
            raise config.ConfigError("the lab stand-in needs --kv-transfer-config (PD disaggregation only)")
        kv_cfg = config.parse_kv_transfer_config(args.kv_transfer_config)
        config.check_parallel(kv_cfg, args.tensor_parallel_size, args.data_parallel_size)
    except config.ConfigError as e:
        print(f"ValueError: {e}", file=sys.stderr)
        return 1
    host_ip = netinfo.get_ip(env, _log)
    host = args.host or "0.0.0.0"
    sock = api.prebind(host, args.port)  # bound, not listening: connects are refused [facts §5]
    engine = Engine(args, kv_cfg, host_ip, env)
    try:
        engine.start()
    except Exception as e:  # noqa: BLE001 - any start-up error kills the engine core, as in vLLM
        return _fail(e)
    _log.info("Supported tasks: %s", json.dumps(["generate"]))
    served = (args.served_model_name or [args.model])[0]
    api.serve(api.build_app(engine, served, args.max_model_len or 4096), sock, host, args.port,
              getattr(args, "shutdown_timeout", 0))
    return 0
