"""D side: REQ sockets that connect lazily to P's handshake ports (1 s timeouts, 3 tries)
[facts §2b], then the KV pull through the transfer engine and done_recving_msg [facts §2d]."""
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import msgpack
import zmq

from . import kvcache, logs, npu, release

TIMEOUT_MS = 1000
RETRIES = 3

_log = logs.get("mooncake_connector.py:1020")
_fail_log = logs.get("mooncake_connector.py:999")


class TransferError(RuntimeError):
    pass


class ZmqClient:
    """One REQ socket per (thread, path); a socket that timed out is replaced (REQ state)."""

    def __init__(self, ctx, timeout_ms=TIMEOUT_MS, retries=RETRIES):
        self.ctx, self.timeout_ms, self.retries = ctx, timeout_ms, retries
        self._local = threading.local()

    def _socket(self, path):
        socks = self._local.__dict__.setdefault("socks", {})
        if path not in socks:
            s = self.ctx.socket(zmq.REQ)
            s.setsockopt(zmq.SNDTIMEO, self.timeout_ms)
            s.setsockopt(zmq.RCVTIMEO, self.timeout_ms)
            s.setsockopt(zmq.LINGER, 0)
            s.connect(path)
            socks[path] = s
        return socks[path]

    def _drop(self, path):
        s = self._local.__dict__.get("socks", {}).pop(path, None)
        if s is not None:
            s.close(0)

    def request(self, path, msg):
        for _unused in range(self.retries):
            try:
                self._socket(path).send(msgpack.packb(msg))
                break
            except zmq.ZMQError:
                self._drop(path)
                time.sleep(0.1)
        else:
            raise RuntimeError(f"Failed to send data to {path} after {self.retries} retries")
        for _unused in range(self.retries):
            try:
                return self._socket(path).recv()
            except zmq.ZMQError:
                time.sleep(0.1)
        self._drop(path)
        raise RuntimeError(f"Failed to receive data after {self.retries} retries")


# Lab fixture kv_corruption (lab/tasks/kv_corruption.yml): while this file exists, the KV this D
# receives is corrupted silently, as a hardware or layout fault would.
CORRUPTION_FLAG = "/run/vllm-pd-lab/kv-corruption"


def corrupt(data):
    return bytes([data[0] ^ 0xFF]) + data[1:] if data else data


# Lab fixture kv_slow (lab/tasks/kv_slow.yml): while this file exists, every KV pull of this D takes the
# milliseconds it holds longer, as over a congested or wrong NIC; the transfer's log line shows the time.
DELAY_FLAG = "/run/vllm-pd-lab/kv-delay-ms"


def transfer_delay(path=DELAY_FLAG):
    """Seconds the fixture adds to a pull (0 without it or with an unreadable file)."""
    try:
        with open(path, encoding="utf-8") as f:
            return max(0.0, float(f.read().strip() or 0) / 1000.0)
    except (OSError, ValueError):
        return 0.0


class KVPuller:
    def __init__(self, ctx, engine, local_ip, tp_size, pool, num_blocks, own_engine_id,
                 block_size=kvcache.BLOCK_SIZE, corruption_flag=CORRUPTION_FLAG, dtype="auto", delay_flag=DELAY_FLAG,
                 prefill_pp=1, facts=None):
        self.block_size, self.corruption_flag, self.dtype = block_size, corruption_flag, dtype
        # P's pipeline size, from kv_connector_extra_config.prefill.pp_size as the connector reads it
        self.prefill_pp = prefill_pp
        self.facts = facts or release.facts()  # the installed release's (its KV log line)
        self.delay_flag = delay_flag
        self.client = ZmqClient(ctx)
        self.engine, self.local_ip, self.tp_size = engine, local_ip, tp_size
        self.pool, self.num_blocks, self.own_engine_id = pool, num_blocks, own_engine_id
        self._meta = {}
        self._meta_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=tp_size, thread_name_prefix="KVCacheRecving")

    def _metadata(self, engine_id, host, port):
        key = (engine_id, port)  # cached per (engine_id, port) [facts §2c]
        with self._meta_lock:
            if key in self._meta:
                return self._meta[key]
        if engine_id == self.own_engine_id:
            raise TransferError(f"Conflict engine id {engine_id} with local engine id {self.own_engine_id}.")
        meta = msgpack.unpackb(self.client.request(f"tcp://{host}:{port}", (b"get_meta_msg", "")),
                               strict_map_key=False)
        with self._meta_lock:
            self._meta[key] = meta
        return meta

    def pull(self, request_id, params, tokens):
        """Pull every P rank's blocks of this request and return what attention reads from them
        (kvcache.read_kv); raise TransferError naming the cause of a failed transfer."""
        p_tp = int(params.get("remote_ptp_size") or self.tp_size)
        ratio = max(1, p_tp // self.tp_size)
        # every pipeline stage and context rank of P holds a part: its workers' ports follow the tp ranks'
        groups = self.prefill_pp * int(params.get("remote_pcp_size") or 1)
        received = {}
        futures = [self._executor.submit(self._pull_rank, request_id, params, tokens, d_rank,
                                         [g * p_tp + r for g in range(groups)
                                          for r in range(d_rank * ratio, (d_rank + 1) * ratio)], received)
                   for d_rank in range(min(self.tp_size, p_tp))]
        errors = [f.exception() for f in futures]
        errors = [e for e in errors if e is not None]
        if errors:
            raise TransferError(str(errors[0]))
        if os.path.exists(self.corruption_flag):
            received = {r: [corrupt(b) for b in blocks] for r, blocks in received.items()}
        # the tp ranks' slices; the other stages' copies of them must match (the stand-in's layers are alike)
        for worker, blocks in received.items():
            if worker >= p_tp and blocks != received.get(worker % p_tp):
                raise TransferError(f"worker {worker} of P (pipeline stage or context rank {worker // p_tp}) sent "
                                    f"other KV than worker {worker % p_tp}")
        first = dict((r, b) for r, b in received.items() if r < p_tp)
        return kvcache.read_kv(tokens, dict(sorted(first.items())), self.block_size, self.dtype)

    def _pull_rank(self, request_id, params, tokens, d_rank, p_ranks, received):
        host, base = params["remote_host"], int(params["remote_port"])
        block_ids = params["remote_block_ids"][0]
        try:
            for p_rank in p_ranks:
                received[p_rank] = self._pull_one(request_id, params, d_rank, p_rank, host, base + p_rank,
                                                  block_ids)
        finally:
            # D always tells P it is done, even after a failure [facts §2d].
            for p_rank in p_ranks:
                try:
                    self.client.request(f"tcp://{host}:{base + p_rank}",
                                        (b"done_recving_msg", params["remote_request_id"], 1))
                except RuntimeError:
                    pass

    def _pull_one(self, request_id, params, d_rank, p_rank, host, port, block_ids):
        start = time.monotonic()
        meta = self._metadata(params["remote_engine_id"], host, port)
        session = f"{host}:{meta['te_rpc_port']}"
        local = self.pool.allocate(len(block_ids))
        try:
            base = kvcache.rank_offset(d_rank, self.num_blocks)
            offsets = [base + b * kvcache.BLOCK_LEN for b in local]
            remote = [meta["kv_caches_base_addr"][0] + b * kvcache.BLOCK_LEN for b in block_ids]
            ret = npu.refuse(meta, d_rank) or self.engine.pull(session, offsets, remote, kvcache.BLOCK_LEN)
            time.sleep(transfer_delay(self.delay_flag))
            if ret < 0:
                _fail_log.error("Mooncake transfer failed for request. remote_request_id=%s, ret=%d.",
                                params["remote_request_id"], ret)
                raise TransferError(f"Mooncake transfer failed, ret: {ret}")
            # Like vLLM, D does not check what it pulled: the model reads it (kvcache.read_kv).
            data = [self.engine.read(off, kvcache.BLOCK_LEN) for off in offsets]
        finally:
            self.pool.free(local)
        fmt, values = release.kv_line_args(self.facts, request_id, (time.monotonic() - start) * 1000, self.local_ip,
                                           d_rank, session, len(block_ids))
        _log.info(fmt, *values)
        return data
