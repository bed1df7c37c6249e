"""Engine core start-up in vLLM-Ascend's order [facts §2c]: model load, KV caches registered with
Mooncake (ADXL ports taken), then the KV threads; any failure ends the process."""
import time
import uuid

import zmq

from . import adxl, config, kvcache, logs, npu, producer, release
from .consumer import KVPuller

NUM_BLOCKS = 64

_sched_log = logs.get("mooncake_connector.py:1699")
_meta_log = logs.get("mooncake_connector.py:2036")
_adxl_log = logs.get("utils.cpp:270")
_load_log = logs.get("model_runner.py:2873")


def visible_devices(env, count):
    """Physical NPU ids of the local ranks (ASCEND_RT_VISIBLE_DEVICES, else 0..count-1)."""
    raw = env.get("ASCEND_RT_VISIBLE_DEVICES", "")
    ids = [int(x) for x in raw.split(",") if x.strip()] if raw else list(range(count))
    if len(ids) < count:
        raise RuntimeError(f"ASCEND_RT_VISIBLE_DEVICES={raw!r} makes {len(ids)} NPU(s) visible; "
                           f"tp*dp_local needs {count}.")
    return ids[:count]


class Engine:
    def __init__(self, args, kv_cfg, host_ip, env):
        self.args, self.kv_cfg, self.host_ip, self.env = args, kv_cfg, host_ip, env
        self.role = kv_cfg["kv_role"]
        self.engine_id = config.engine_id(kv_cfg)
        self.tp = args.tensor_parallel_size
        self.pp, self.pcp = args.pipeline_parallel_size, args.prefill_context_parallel_size
        # workers of one DP rank: (pp_rank*pcp + pcp_rank)*tp + tp_rank, each with an NPU and a handshake port
        self.width = self.tp * self.pp * self.pcp
        self.dp_ranks = list(range(args.dp_rank_start, args.dp_rank_start + args.dp_size_local))
        self.ranks = self.width * len(self.dp_ranks)
        # the variable (and default) the connector of the installed release reads
        self.release = release.facts()
        self.abort_timeout = int(env.get(self.release["abort_env"], str(self.release["abort_default"])))
        self.block_size = args.block_size or kvcache.BLOCK_SIZE
        self.kv_dtype = args.kv_cache_dtype or "auto"
        self.moe = config.is_moe(config.read_model_config(args.model))
        # vLLM resets data_parallel_rank to 0 for a dense model, unless the release's balance-scheduling patch keeps
        # it (release table dense_dp_keeps_rank); the connector's ports follow it.
        self.port_ranks = config.port_dp_ranks(self.dp_ranks, True if release.dense_keeps_rank(self.release, env) else self.moe)
        self.pool = kvcache.BlockPool(NUM_BLOCKS)
        self.ctx = zmq.Context()

    def start(self):
        if self.moe is None:
            _load_log.warning("%s/config.json not found: the lab stand-in treats the model as MoE", self.args.model)
        _sched_log.info("Initializing Mooncake Scheduler %s", self.engine_id)
        delay = float(self.env.get("VLLM_LAB_STARTUP_DELAY", "0"))
        time.sleep(delay)  # model load
        _load_log.info("Model loading took 0.00 GiB and %.6f seconds (lab stand-in)", delay)
        devices = visible_devices(self.env, self.ranks)
        npu.startup(devices)  # the lab NPU layer (lab/npu): broken NPUs fail their transfers
        base = int(self.env.get("ASCEND_BASE_PORT", "20000"))
        self._adxl = adxl.listen_ports(devices, base, _adxl_log)
        from .transfer import TransferEngine

        self.te = TransferEngine(self.host_ip, self.ranks * NUM_BLOCKS * kvcache.BLOCK_LEN)
        _meta_log.info("MooncakeConnector set_xfer_handshake_metadata: worker_count=%d, engine_id=%s",
                       self.ranks, self.engine_id)
        if self.role == "kv_producer":
            # every worker of the request's DP rank (each pipeline stage and context rank) is told done by D
            self.frees = producer.DelayedFrees(self.pool, self.width, self.abort_timeout)
            ports = [p for r in self.port_ranks
                     for p in config.handshake_ports(self.kv_cfg["kv_port"], r, self.tp, self.pp, self.pcp)]
            meta = [self._metadata(i, port) for i, port in enumerate(ports)]
            self.threads = producer.start_sending_threads(self.ctx, self.host_ip, ports, meta, self.frees.done)
            self.frees.run_reaper()
        else:  # kv_consumer / kv_both: the receiving side binds nothing [facts §2a]
            prefill = self.kv_cfg["kv_connector_extra_config"].get("prefill", {})
            self.puller = KVPuller(self.ctx, self.te, self.host_ip, self.tp, self.pool, NUM_BLOCKS, self.engine_id,
                                   self.block_size, dtype=self.kv_dtype, prefill_pp=int(prefill.get("pp_size", 1)),
                                   facts=self.release)

    def _metadata(self, rank_index, port):
        return {
            "engine_id": self.engine_id, "te_rpc_port": self.te.rpc_port, "kv_group2layeridx": {0: [0]},
            "block_size": self.block_size,
            "kv_caches_base_addr": [self.te.base_addr + kvcache.rank_offset(rank_index, NUM_BLOCKS)],
            "block_size_scale": 1, "num_blocks": NUM_BLOCKS, "block_lens": [kvcache.BLOCK_LEN],
            "block_strides": [kvcache.BLOCK_LEN], "local_ip": self.host_ip, "handshake_port": port,
            "npu": npu.advertise(rank_index),
        }

    def prefill_for_remote_decode(self, request_id, tokens):
        """Fill the prompt's blocks on every local rank and delay their free [facts §2d]."""
        n = kvcache.num_blocks_for(tokens, self.block_size)
        blocks = self.pool.allocate(n)
        # each worker of the first local DP rank holds its tp rank's slice (a pipeline stage: its layers; the
        # stand-in's layers are alike, so every stage holds the same bytes per tp rank)
        for worker in range(self.width):
            base = kvcache.rank_offset(worker, NUM_BLOCKS)
            for i, b in enumerate(blocks):
                content = kvcache.block_content(tokens, worker % self.tp, i, self.block_size, self.kv_dtype)
                self.te.write(base + b * kvcache.BLOCK_LEN, content)
        self.frees.add(request_id, blocks)
        dp_rank = self.port_ranks[0]
        return {
            "do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": [blocks],
            "remote_engine_id": self.engine_id, "remote_request_id": request_id,
            "remote_host": self.host_ip,
            "remote_port": config.side_channel_port(self.kv_cfg["kv_port"], dp_rank, self.tp, self.pp, self.pcp),
            "remote_pcp_size": self.pcp, "remote_dcp_size": 1, "remote_ptp_size": self.tp,
            "last_token_id": 0, "remote_multi_nodes_meta_mapping": None, "num_prompt_blocks": n,
            "remote_block_size": self.block_size,
        }


def internal_request_id(external):
    """external id + '-' + 8 random characters [facts §2d]."""
    return f"{external}-{uuid.uuid4().hex[:8]}"
