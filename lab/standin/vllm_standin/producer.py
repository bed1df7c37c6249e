"""P side: one KVCacheSendingThread (ZMQ ROUTER bound on get_ip():handshake_port) per worker
[facts §2a-2c], and the delayed free / force free of finished requests [facts §2d]."""
import threading
import time

import msgpack
import zmq

from . import logs

GET_META_MSG = b"get_meta_msg"
DONE_RECVING_MSG = b"done_recving_msg"
POLL_SECONDS = 3  # the worker checks its KV threads every 3 s [facts §2c]
READY_TIMEOUT = 300

_thread_log = logs.get("mooncake_connector.py:302")
_loop_log = logs.get("mooncake_connector.py:389")
_worker_log = logs.get("mooncake_connector.py:2577")
_sched_log = logs.get("mooncake_connector.py:1983")
_free_log = logs.get("mooncake_connector.py:234")


class KVCacheSendingThread(threading.Thread):
    def __init__(self, ctx, host, port, tp_rank, metadata, on_done):
        super().__init__(daemon=True, name=f"KVCacheSendingThread-{tp_rank}")
        self.ctx, self.host, self.port, self.tp_rank = ctx, host, port, tp_rank
        self.metadata, self.on_done = metadata, on_done
        self.ready = threading.Event()
        self.path = f"tcp://{host}:{port}"

    def run(self):
        try:
            sock = self.ctx.socket(zmq.ROUTER)
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.setsockopt(zmq.SNDHWM, 0)
            sock.bind(self.path)
        except Exception as e:  # noqa: BLE001 - vLLM-Ascend logs any bind error the same way
            _thread_log.exception(
                "Mooncake KVCacheSendingThread encountered exception. Thread: tp_rank=%d, pp_rank=%d, "
                "listening_path=%s. Error: %s", self.tp_rank, 0, self.path, e)
            return
        _thread_log.info("KVCacheSendingThread started listening on path: %s. Thread: tp_rank=%d, "
                         "pp_rank=%d, pcp_rank=%d", self.path, self.tp_rank, 0, 0)
        self.ready.set()
        while True:
            try:
                frames = sock.recv_multipart()
            except zmq.ContextTerminated:  # process shutting down
                return
            if len(frames) < 3:
                _loop_log.warning("Connection listener got unexpected frames: %d", len(frames))
                continue
            identity, payload = frames[0], frames[-1]
            try:
                msg = msgpack.unpackb(payload)
            except Exception as e:  # noqa: BLE001 - bad frames only log; the loop goes on [facts §2b]
                _loop_log.error("Failed to decode message: %s", e)
                continue
            if msg and msg[0] == GET_META_MSG:
                sock.send_multipart([identity, b"", msgpack.packb(self.metadata)])
            elif msg and msg[0] == DONE_RECVING_MSG and len(msg) >= 2:
                self.on_done(msg[1], self.tp_rank)
                sock.send_multipart([identity, b"", b"ACK"])
            else:
                _loop_log.error("Connection listener received unexpected message type: %s", msg[:1])
                sock.send_multipart([identity, b"", b"ERR"])


def start_sending_threads(ctx, host, ports, metadata, on_done, poll=POLL_SECONDS, timeout=READY_TIMEOUT):
    """Start one thread per port and wait like the worker does; raise vLLM-Ascend's error."""
    threads = [KVCacheSendingThread(ctx, host, port, rank, metadata[rank], on_done)
               for rank, port in enumerate(ports)]
    for t in threads:
        t.start()
    for t in threads:
        t.ready.wait(0.1)
    deadline = time.monotonic() + timeout
    # Like the worker: sleep, then look; a dead thread is only noticed at the next poll.
    while not all(t.ready.is_set() for t in threads):
        time.sleep(poll)
        if any(not t.is_alive() and not t.ready.is_set() for t in threads):
            raise RuntimeError("KV Cache sending/receiving thread failed to start.")
        if time.monotonic() > deadline:
            raise RuntimeError("Timeout waiting for KV Cache thread to be ready.")
    return threads


class DelayedFrees:
    """Blocks of requests D has still to pull; freed when every rank got done_recving_msg, or
    force-freed after VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT seconds [facts §2d, §2e]."""

    def __init__(self, pool, ranks, abort_timeout, clock=time.monotonic):
        self.pool, self.ranks, self.abort_timeout, self.clock = pool, ranks, abort_timeout, clock
        self._pending = {}
        self._lock = threading.Lock()

    def add(self, request_id, blocks):
        _sched_log.info("Delaying free of %d blocks for request %s", len(blocks), request_id)
        with self._lock:
            self._pending[request_id] = (blocks, set(), self.clock() + self.abort_timeout)

    def done(self, request_id, tp_rank):
        if isinstance(request_id, bytes):
            request_id = request_id.decode()
        with self._lock:
            entry = self._pending.get(request_id)
            if entry is None:
                return False
            entry[1].add(tp_rank)
            if len(entry[1]) < self.ranks:
                return False
            del self._pending[request_id]
        self.pool.free(entry[0])
        return True

    def expire(self):
        now = self.clock()
        with self._lock:
            expired = [(r, e) for r, e in self._pending.items() if e[2] <= now]
            for r, _unused in expired:
                del self._pending[r]
        for request_id, (blocks, _unused, _unused2) in expired:
            self.pool.free(blocks)
            _free_log.error("Force freed expired request: %s. Reason: Request exceeded timeout threshold "
                            "(%s seconds). Action: Resources have been forcibly released to prevent "
                            "memory leak.", request_id, self.abort_timeout)
        return [r for r, _unused in expired]

    def run_reaper(self, interval=1.0):
        def loop():
            while True:
                time.sleep(interval)
                self.expire()
        threading.Thread(target=loop, daemon=True, name="ForceFreeReaper").start()

    @property
    def pending(self):
        with self._lock:
            return sorted(self._pending)
