"""Stopping an engine lets its requests in flight finish (issue 21, item 3: vLLM's --shutdown-timeout).

vLLM from v0.18.0 refuses new requests on SIGTERM and, with its default --shutdown-timeout 0, cuts the
ones in flight at once (shared docs day2-ops.md §2a); the lab stand-in does the same. The roles pass
--shutdown-timeout (vllm_pd_shutdown_timeout, 60 s) when the installed `vllm serve` lists it, and give
systemd that long plus 30 s before it kills. Proven on requests sent straight to D, which no drain of
the proxy protects: stopped mid-stream, they complete; with vllm_pd_shutdown_timeout=0 the same stop
cuts them, so this test fails if the option is not passed or the stand-in stops being honest.

Cluster lab42 of lab/gen-inventory (pd-p42, pd-d42), its own inventory; removed at the end.
"""
import shlex
import time

import pytest

from conftest import own_lab
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen

pytestmark = pytest.mark.lab

D, UNIT = "pd-d42", "vllm-pd-decode.service"
# each stream lasts about 5 s: 100 tokens (the stand-in gives at most 128) of 50 ms decode steps
STREAMS, TOKENS, STEP_MS = 4, 100, 50


@pytest.fixture(scope="module")
def lab42(tmp_path_factory):
    # the lab's engine env (inventory/lab/group_vars/all/pd.yml) with slower decode steps
    slow = {"vllm_pd_engine_env": {"VLLM_LAB_STARTUP_DELAY": "3", "VLLM_LAB_PREFILL_MS_PER_TOKEN": "2",
                                   "VLLM_LAB_DECODE_MS_PER_TOKEN": str(STEP_MS)}}
    with own_lab(tmp_path_factory, 42, group_vars={"lab42": slow}) as lab:
        yield lab


def exec_start(lab):
    return lab.run(D, f"systemctl show -p ExecStart --value {UNIT}").stdout


def stop_mid_stream(lab):
    """STREAMS streamed requests straight to D's API; once they stream, systemctl stop. Returns the load
    generator's result and the seconds the stop took."""
    spec = loadgen.LoadSpec(f"http://{lab.hosts[D]['data_ip']}:8200", rate=None, concurrency=STREAMS, count=STREAMS,
                            max_tokens=TOKENS, timeout=60, guard=lab.guard)
    bg = loadgen.Background(spec).start()
    time.sleep(1.0)
    started = time.monotonic()
    lab.run(D, f"systemctl stop {UNIT}")
    took = time.monotonic() - started
    return bg.wait(), took


def test_stop_lets_requests_in_flight_finish_and_zero_cuts_them(lab42):
    lab = lab42
    lab.playbook("playbooks/deploy_pd.yml")
    argv = shlex.split(exec_start(lab).split("argv[]=", 1)[1].split(" ;", 1)[0])
    assert argv[argv.index("--shutdown-timeout") + 1] == "60", argv
    assert lab.run(D, f"systemctl show -p TimeoutStopUSec --value {UNIT}").stdout.strip() == "1min 30s"

    result, took = stop_mid_stream(lab)
    assert (result["completed"], result["failed"]) == (STREAMS, 0), result["errors"]
    assert result["total_output_tokens"] == STREAMS * TOKENS
    assert took >= 2.0, f"the stop returned in {took:.1f} s, before the streams could end"

    # the same stop with the option off cuts every stream, as vLLM's default does
    r = lab.playbook("playbooks/deploy_pd.yml", "-e", "vllm_pd_shutdown_timeout=0")
    assert "--shutdown-timeout" not in exec_start(lab)
    assert lab.changed(r)[D] > 0
    result, took = stop_mid_stream(lab)
    assert (result["completed"], result["failed"]) == (0, STREAMS), result
    assert took < 10, f"the stop took {took:.1f} s with nothing to wait for"

    # back to the default, then a second run changes nothing
    lab.playbook("playbooks/deploy_pd.yml")
    assert "--shutdown-timeout" in exec_start(lab)
    r = lab.playbook("playbooks/deploy_pd.yml")
    assert set(lab.changed(r).values()) == {0}, lab.changed(r)
