"""P's ROUTER threads and D's REQ client over loopback ZeroMQ [facts §2b, §2c], the delayed and
forced frees [facts §2d], and ADXL's port choice [facts §2f]."""
import logging
import random
import socket

import msgpack
import pytest
import zmq

from vllm_standin import adxl, consumer, kvcache, producer


@pytest.fixture
def ctx():
    # ROUTER threads live on (daemons, as in the stand-in): closing their sockets from here
    # is not thread-safe, so the process-wide context is left to the interpreter's exit.
    return zmq.Context.instance()


def test_router_answers_metadata_and_done(ctx, free_group):
    port, done = free_group(1)[0], []
    meta = {"engine_id": "p-1", "te_rpc_port": 15001, "kv_group2layeridx": {0: [0]}}
    threads = producer.start_sending_threads(ctx, "127.0.0.1", [port], [meta], lambda r, k: done.append((r, k)),
                                             poll=0.05)
    assert threads[0].ready.is_set()
    client = consumer.ZmqClient(ctx)
    reply = msgpack.unpackb(client.request(f"tcp://127.0.0.1:{port}", (b"get_meta_msg", "")), strict_map_key=False)
    assert reply == meta
    assert client.request(f"tcp://127.0.0.1:{port}", (b"done_recving_msg", "req-1", 1)) == b"ACK"
    assert done == [("req-1", 0)]


@pytest.mark.parametrize("holder", ["busy", "not-local"])
def test_bind_failure_ends_startup_with_vllm_ascends_error(ctx, caplog, holder, free_group):
    first, port = free_group(2)   # rank 0 binds first, rank 1 fails on port
    blocker = socket.socket()
    host = "127.0.0.1"
    if holder == "busy":
        blocker.bind((host, port))
        blocker.listen()
    else:
        host = "192.0.2.1"  # TEST-NET: never local, so bind() fails with EADDRNOTAVAIL
    try:
        with caplog.at_level(logging.INFO, logger="vllm"), \
                pytest.raises(RuntimeError, match=r"^KV Cache sending/receiving thread failed to start\.$"):
            producer.start_sending_threads(ctx, host, [first, port] if holder == "busy" else [port],
                                           [{}, {}], lambda *a: None, poll=0.05)
    finally:
        blocker.close()
    assert "Mooncake KVCacheSendingThread encountered exception. Thread: tp_rank=" in caplog.text
    assert f"listening_path=tcp://{host}:{port}" in caplog.text


def test_req_client_gives_up_on_a_silent_non_zmq_port(ctx):
    # An HTTP server sends nothing first: the ZMTP handshake never completes.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    client = consumer.ZmqClient(ctx, timeout_ms=100)
    try:
        with pytest.raises(RuntimeError, match="Failed to receive data after 3 retries"):
            client.request(f"tcp://127.0.0.1:{srv.getsockname()[1]}", (b"get_meta_msg", ""))
    finally:
        srv.close()


def test_done_from_every_rank_frees_and_timeout_force_frees(caplog):
    now = [100.0]
    pool = kvcache.BlockPool(8)
    frees = producer.DelayedFrees(pool, ranks=2, abort_timeout=30, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="vllm"):
        frees.add("a", pool.allocate(3))
        frees.add("b", pool.allocate(2))
        assert pool.num_free == 3
        assert frees.done(b"a", 0) is False and frees.done("a", 1) is True
        assert pool.num_free == 6 and frees.pending == ["b"]
        now[0] += 29
        assert frees.expire() == []
        now[0] += 1
        assert frees.expire() == ["b"] and pool.num_free == 8
    assert "Delaying free of 3 blocks for request a" in caplog.text
    assert ("Force freed expired request: b. Reason: Request exceeded timeout threshold (30 seconds)."
            in caplog.text)
    assert "Force freed expired request: a" not in caplog.text


def test_puller_refuses_its_own_engine_id(ctx, free_group):
    puller = consumer.KVPuller(ctx, engine=None, local_ip="127.0.0.1", tp_size=1, pool=kvcache.BlockPool(4),
                               num_blocks=4, own_engine_id="e-1")
    with pytest.raises(consumer.TransferError, match="Conflict engine id e-1 with local engine id e-1"):
        puller._metadata("e-1", "127.0.0.1", free_group(1)[0])


def test_adxl_ports_are_held_inside_each_devices_window():
    log = logging.getLogger("test")
    held = adxl.listen_ports([0, 3], 41000, log, rng=random.Random(7))
    try:
        ports = [s.getsockname()[1] for s in held]
        assert 41000 <= ports[0] <= 41100 and 41300 <= ports[1] <= 41400
        with socket.socket() as s, pytest.raises(OSError):
            s.bind(("127.0.0.1", ports[0]))
    finally:
        for s in held:
            s.close()


def test_block_content_differs_by_rank_block_and_prompt():
    t = kvcache.tokenize("a b c")
    assert kvcache.block_content(t, 0, 0) == kvcache.block_content(kvcache.tokenize("a  b c"), 0, 0)
    assert len({kvcache.block_content(t, 0, 0), kvcache.block_content(t, 1, 0),
                kvcache.block_content(kvcache.tokenize("a b d"), 0, 0)}) == 3
    assert kvcache.num_blocks_for(["x"] * (kvcache.BLOCK_SIZE + 1)) == 2


def test_kv_slow_fixture_file_sets_the_pull_delay(tmp_path):
    flag = tmp_path / "kv-delay-ms"
    assert consumer.transfer_delay(str(flag)) == 0.0  # no fixture
    flag.write_text("250\n")
    assert consumer.transfer_delay(str(flag)) == 0.25
    flag.write_text("soon")
    assert consumer.transfer_delay(str(flag)) == 0.0  # an unreadable file slows nothing
