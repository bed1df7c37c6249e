"""The lab stand-in of vllm-ascend's example proxy keeps its documented membership semantics
(day2-ops.md §1a): add waits for /v1/models, remove under traffic only taints (priority 1e15) until the
proxy-global request_num is 0, no ejection of a dead member."""
import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "..", "lab", "standin", "examples",
                     "load_balance_proxy_server_example.py")
_spec = importlib.util.spec_from_file_location("example_proxy", _PATH)
px = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(px)

P1, P2, D1, D2 = ("10.0.0.1", 8100), ("10.0.0.2", 8100), ("10.0.0.3", 8200), ("10.0.0.4", 8200)


def sched():
    return px.Scheduler([P1], [D1, D2])


def test_cli_flags_and_defaults_of_the_example():
    a = px.parse_args(["--host", "1.2.3.4", "--prefiller-hosts", "a", "--prefiller-ports", "1",
                       "--decoder-hosts", "b", "c", "--decoder-ports", "2", "3"])
    assert (a.max_retries, a.retry_delay, a.max_waiting_retries, a.waiting_retry_interval) == (3, 0.001, 3, 10)
    with pytest.raises(ValueError, match="decoder hosts"):
        px.parse_args(["--decoder-hosts", "b", "c", "--decoder-ports", "2"])
    with pytest.raises(SystemExit):
        px.parse_args(["--no-such-flag"])


def test_add_waits_for_the_models_probe_then_drops_after_max_retries():
    s = sched()
    assert s.add("prefill", [P2]) == ["10.0.0.2:8100"]
    assert s.add("prefill", [P2, P1]) == []          # waiting or member already
    assert s.probe_waiting(lambda h, p: False, 3) == []
    assert s.probe_waiting(lambda h, p: False, 3) == []
    assert s.snapshot()["prefill"] == ["10.0.0.1:8100"]
    assert s.probe_waiting(lambda h, p: False, 3) == ["10.0.0.2:8100"]
    assert s.waiting == {}
    s.add("prefill", [P2])
    s.probe_waiting(lambda h, p: True, 3)
    assert s.snapshot()["prefill"] == ["10.0.0.1:8100", "10.0.0.2:8100"]


def test_remove_idle_is_immediate():
    s = sched()
    assert s.remove("decode", [D2]) is False
    assert s.snapshot()["decode"] == ["10.0.0.3:8200"]


def test_remove_in_flight_only_taints_until_the_global_count_is_zero():
    s = sched()
    s.pick("prefill", 1.0, begin=True)
    assert s.healthcheck()["request_num"] == 1
    assert s.remove("decode", [D1]) is True
    # tainted: still listed, picked only when nothing else of its role is left
    assert s.snapshot()["decode"] == ["10.0.0.3:8200", "10.0.0.4:8200"]
    assert [s.pick("decode", 100.0)[0] for attempt in range(3)] == ["10.0.0.4:8200"] * 3
    s.probe_waiting(lambda h, p: True, 3)
    assert len(s.snapshot()["decode"]) == 2          # request_num is still 1: not removed
    s.finish()
    s.probe_waiting(lambda h, p: True, 3)
    assert s.snapshot()["decode"] == ["10.0.0.4:8200"]


def test_a_tainted_last_member_is_still_chosen_and_a_dead_member_is_never_dropped():
    s = px.Scheduler([P1], [D1])
    s.pick("prefill", 1.0, begin=True)
    s.remove("decode", [D1])
    assert s.pick("decode", 1.0)[0] == "10.0.0.3:8200"
    assert s.probe_waiting(lambda h, p: False, 1) == []   # members are not probed
    assert s.snapshot()["prefill"] == ["10.0.0.1:8100"]


def test_instances_parse_as_upstream():
    assert px.parse_instances("h:1") == [("h", 1)]
    assert px.parse_instances(["a:1", "b:2"]) == [("a", 1), ("b", 2)]
    assert px.server_key("localhost", 1) == px.server_key("127.0.0.1", "1")
