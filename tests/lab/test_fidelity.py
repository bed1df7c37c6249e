"""The lab's own proof (issue 3): the stand-in, started by hand WITHOUT the collection's fixes,
reproduces each fault of the field report, and works when the setup is right.

Each test starts `vllm serve` (the stand-in at /opt/vllm-lab/bin/vllm) as transient systemd
units on the first P and D host, on ports of its own (kv 29002, API 8110/8210, proxy 8010), so a
deployment of the collection on the same lab is left alone. If the stand-in were changed to
"just work" (bind the wildcard, ignore bind errors, skip ADXL, fake the transfer), these fail.
"""
import json
import re
import shlex
import subprocess
import time

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen

KV_PORT, P_API, D_API, PROXY = 29002, 8110, 8210, 8010
TP = 8
ABORT_TIMEOUT = 5
STANDIN = "/opt/vllm-lab/bin/vllm"


def kv_config(role, kv_port=KV_PORT):
    return json.dumps({"kv_connector": "MooncakeConnectorV1", "kv_role": role, "kv_port": kv_port,
                       "kv_connector_extra_config": {"prefill": {"tp_size": TP, "dp_size": 1},
                                                     "decode": {"tp_size": TP, "dp_size": 1}}})


class Units:
    """Transient units started by a test; stopped and forgotten at the end."""

    def __init__(self, lab):
        self.lab, self.started, self.invocation = lab, [], {}

    def start(self, host, unit, argv, env):
        props = " ".join(f"-E {shlex.quote(f'{k}={v}')}" for k, v in env.items())
        r = self.lab.ssh(host, f"systemctl reset-failed {unit} 2>/dev/null; "
                               f"systemd-run -q --unit={unit} {props} {shlex.join(argv)} && "
                               f"systemctl show -p InvocationID --value {unit}")
        self.invocation[host, unit] = r.stdout.strip()
        self.started.append((host, unit))

    def log(self, host, unit):
        """This start's lines only (the unit name is reused across tests)."""
        return self.lab.ssh(host, f"journalctl -q -o cat --no-pager _SYSTEMD_INVOCATION_ID="
                                  f"{self.invocation[host, unit]}", check=False).stdout

    def wait_log(self, host, unit, pattern, timeout=60, count=1):
        deadline = time.monotonic() + timeout
        while True:
            text = self.log(host, unit)
            if len(re.findall(pattern, text)) >= count:
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{unit} on {host}: no {pattern!r} x{count} in {timeout} s:\n{text[-3000:]}")
            time.sleep(0.5)

    def state(self, host, unit):
        props = self.lab.host(host).service(unit).systemd_properties
        return {k: props[k] for k in ("ActiveState", "Result", "ExecMainStatus")}

    def wait_dead(self, host, unit, timeout=30):
        deadline = time.monotonic() + timeout
        while (s := self.state(host, unit))["ActiveState"] not in ("failed", "inactive"):
            if time.monotonic() > deadline:
                raise AssertionError(f"{unit} on {host} still {s} after {timeout} s")
            time.sleep(0.5)
        return s

    def stop(self, host, unit):
        self.lab.ssh(host, f"systemctl stop {unit} 2>/dev/null; systemctl reset-failed {unit} 2>/dev/null; true")

    def stop_all(self):
        for host, unit in reversed(self.started):
            self.stop(host, unit)
        self.started.clear()


@pytest.fixture(scope="module", autouse=True)
def no_engines(lab):
    """The faults must come from the stand-in alone: a deployed engine's own ADXL and group
    ports would collide with these tests' ports (as a second engine on a host does for real)."""
    for host in lab.hosts:
        lab.ssh(host, "systemctl stop vllm-pd-proxy vllm-pd-decode vllm-pd-prefill 2>/dev/null; true")


@pytest.fixture
def units(lab):
    u = Units(lab)
    yield u
    u.stop_all()


@pytest.fixture
def pd(lab):
    p, d = lab.prefill[0], lab.decode[0]
    return p, d, lab.hosts[p], lab.hosts[d]


def serve(units, host, unit, role, api_port, host_ip=None, kv_port=KV_PORT, listen_ip=None, delay=0, **extra_env):
    env = {"VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT": ABORT_TIMEOUT, "VLLM_LAB_STARTUP_DELAY": delay, **extra_env}
    if host_ip:
        env["VLLM_HOST_IP"] = host_ip
    argv = [STANDIN, "serve", "/models/lab-model", "--host", listen_ip or "0.0.0.0", "--port", str(api_port),
            "--tensor-parallel-size", str(TP), "--kv-transfer-config", kv_config(role, kv_port)]
    units.start(host, unit, argv, env)


def proxy(units, host, listen, p_ip, d_ip):
    units.start(host, "lab-fidelity-proxy", [
        "/usr/bin/python3", "-u", "-m", "mooncake.vllm_v1_proxy_server", "--host", listen, "--port", str(PROXY),
        "--prefiller-hosts", p_ip, "--prefiller-ports", str(P_API),
        "--decoder-hosts", d_ip, "--decoder-ports", str(D_API)], {})
    units.wait_log(host, "lab-fidelity-proxy", r"Uvicorn running on")


def complete(lab, ip, prompt="the report lost days to two faults"):
    lab.guard(ip)
    r = subprocess.run(["curl", "-sS", "-m", "60", "-w", "\n%{http_code}", f"http://{ip}:{PROXY}/v1/completions",
                        "-H", "Content-Type: application/json",
                        "-d", json.dumps({"model": "/models/lab-model", "prompt": prompt, "max_tokens": 8})],
                       capture_output=True, text=True, check=False)
    body, _unused, code = r.stdout.rpartition("\n")
    return code, body


def test_unset_host_ip_advertises_mgmt_ip_and_the_request_fails(lab, units, pd):
    p, d, ph, dh = pd
    serve(units, p, "lab-fidelity-p", "kv_producer", P_API, listen_ip=ph["data_ip"])
    serve(units, d, "lab-fidelity-d", "kv_consumer", D_API, listen_ip=dh["data_ip"])
    plog = units.wait_log(p, "lab-fidelity-p", r"Application startup complete")
    units.wait_log(d, "lab-fidelity-d", r"Application startup complete")
    # get_ip() took the default route: the management NIC, which peers cannot reach.
    listening = re.findall(r"started listening on path: tcp://([\d.]+):(\d+)", plog)
    assert {ip for ip, _unused in listening} == {ph["mgmt_ip"]}, plog
    assert sorted(int(port) for _unused, port in listening) == list(range(KV_PORT, KV_PORT + TP))
    proxy(units, p, ph["data_ip"], ph["data_ip"], dh["data_ip"])
    code, body = complete(lab, ph["data_ip"])
    assert '"text"' not in body, (code, body)
    dlog = units.wait_log(d, "lab-fidelity-d", r"Failed to transfer KV cache for request")
    assert "Failed to receive data after 3 retries" in dlog, dlog  # REQ to an address D cannot reach
    assert "KV cache transfer for request" not in dlog
    # D never got through, so P keeps the blocks until the abort timeout, then force-frees.
    units.wait_log(p, "lab-fidelity-p", r"Force freed expired request: cmpl-", timeout=ABORT_TIMEOUT + 20)


def test_grafana_on_one_group_port_kills_prefill_while_curl_answers(lab, units, pd):
    p, _unused, ph, _unused2 = pd
    taken = KV_PORT + 3
    lab.fixtures(p, ["conflict_service"], lab_conflict_service_port=taken)
    try:
        serve(units, p, "lab-fidelity-p", "kv_producer", P_API, host_ip=ph["data_ip"], listen_ip=ph["data_ip"])
        state = units.wait_dead(p, "lab-fidelity-p")
        log = units.log(p, "lab-fidelity-p")
        assert state["Result"] == "exit-code" and state["ExecMainStatus"] != "0", state
        assert "KV Cache sending/receiving thread failed to start." in log, log
        assert re.search(rf"Address already in use.*tcp://{re.escape(ph['data_ip'])}:{taken}|"
                         rf"listening_path=tcp://{re.escape(ph['data_ip'])}:{taken}\. Error: Address already in use", log), log
        assert "Application startup complete" not in log
        # The trap: the port "works" for curl, because Grafana answers it.
        lab.guard(ph["data_ip"])
        r = subprocess.run(["curl", "-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
                            f"http://{ph['data_ip']}:{taken}/"], capture_output=True, text=True, check=False)
        assert r.stdout == "200", r
    finally:
        lab.fixtures(p, state="absent")


def test_kv_port_in_adxl_window_fails_intermittently(lab, units, pd):
    p, _unused, ph, _unused2 = pd
    kv_port = 20002  # the report's value: inside device 0's ADXL window [20000, 20100]
    outcomes = []
    for attempt in range(80):
        unit = "lab-fidelity-adxl"
        serve(units, p, unit, "kv_producer", P_API, host_ip=ph["data_ip"], kv_port=kv_port, listen_ip=ph["data_ip"])
        deadline = time.monotonic() + 30
        while True:
            log = units.log(p, unit)
            if "KV Cache sending/receiving thread failed to start." in log:
                assert "Address already in use" in log, log
                outcomes.append("fail")
                break
            if len(re.findall(r"KVCacheSendingThread started listening", log)) == TP:
                outcomes.append("ok")
                break
            assert time.monotonic() < deadline, f"attempt {attempt}: neither bound nor failed:\n{log[-2000:]}"
            time.sleep(0.3)
        units.stop(p, unit)
        if "fail" in outcomes and "ok" in outcomes:
            break
    assert "fail" in outcomes and "ok" in outcomes, f"expected both outcomes in {len(outcomes)} starts: {outcomes}"


def test_right_ip_and_free_group_move_kv(lab, units, pd):
    p, d, ph, dh = pd
    serve(units, p, "lab-fidelity-p", "kv_producer", P_API, host_ip=ph["data_ip"], listen_ip=ph["data_ip"])
    serve(units, d, "lab-fidelity-d", "kv_consumer", D_API, host_ip=dh["data_ip"], listen_ip=dh["data_ip"])
    plog = units.wait_log(p, "lab-fidelity-p", r"Application startup complete")
    units.wait_log(d, "lab-fidelity-d", r"Application startup complete")
    assert set(re.findall(r"started listening on path: tcp://([\d.]+):", plog)) == {ph["data_ip"]}
    proxy(units, p, ph["data_ip"], ph["data_ip"], dh["data_ip"])
    code, body = complete(lab, ph["data_ip"])
    assert code == "200", body
    reply = json.loads(body)
    assert reply["choices"][0]["text"].strip(), reply
    dlog = units.wait_log(d, "lab-fidelity-d", rf"KV cache transfer for request {re.escape(reply['id'])}-\w+ took",
                          count=TP)
    assert f"remote_session_id {ph['data_ip']}:" in dlog
    assert "Failed to transfer KV cache" not in dlog
    # D told every P rank it was done: nothing is left for the force-free.
    time.sleep(ABORT_TIMEOUT + 2)
    assert "Force freed expired request" not in units.log(p, "lab-fidelity-p")


def scrape(lab, ip, port):
    """{(name, labels): value} of an engine's /metrics (route-guarded)."""
    lab.guard(ip)
    r = subprocess.run(["curl", "-sS", "-m", "10", f"http://{ip}:{port}/metrics"], capture_output=True, text=True,
                       check=True)
    out = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^([a-z_:]+)(\{[^}]*\})? (\S+)$", line)
        if m:
            out[m.group(1), m.group(2) or ""] = float(m.group(3))
    return out


def metric(values, name, **labels):
    found = [v for (n, lab), v in values.items() if n == name and all(f'{k}="{x}"' in lab for k, x in labels.items())]
    assert len(found) == 1, (name, labels, sorted(values))
    return found[0]


def test_time_per_token_and_metrics_count_what_happened(lab, units, pd):
    """The stand-in spends prefill and decode time (TTFT, TPOT mean something) and /metrics counts what
    it did under vLLM's names: D's tokens and latencies, P's blocks held for D as KV cache usage."""
    p, d, ph, dh = pd
    timing = {"VLLM_LAB_PREFILL_MS_PER_TOKEN": 20, "VLLM_LAB_DECODE_MS_PER_TOKEN": 50}
    serve(units, p, "lab-fidelity-p", "kv_producer", P_API, host_ip=ph["data_ip"], listen_ip=ph["data_ip"], **timing)
    serve(units, d, "lab-fidelity-d", "kv_consumer", D_API, host_ip=dh["data_ip"], listen_ip=dh["data_ip"], **timing)
    units.wait_log(p, "lab-fidelity-p", r"Application startup complete")
    units.wait_log(d, "lab-fidelity-d", r"Application startup complete")
    proxy(units, p, ph["data_ip"], ph["data_ip"], dh["data_ip"])
    prompt = "one two three four five six seven eight nine ten"  # 10 tokens: 200 ms of prefill on P
    result = loadgen.run(loadgen.LoadSpec(f"http://{ph['data_ip']}:{PROXY}", prompt=prompt, max_tokens=8,
                                          rate=2, count=4, guard=lab.guard))
    assert (result["completed"], result["failed"]) == (4, 0), result["errors"]
    assert result["total_output_tokens"] == 32
    # client TTFT: P's prefill (200 ms) + the pull + D's first decode step (50 ms); TPOT one step
    assert result["ttft_ms"]["min"] >= 250, result["ttft_ms"]
    assert 45 <= result["tpot_ms"]["mean"] < 500, result["tpot_ms"]
    dm = scrape(lab, dh["data_ip"], D_API)
    assert metric(dm, "vllm:generation_tokens_total") == 32
    assert metric(dm, "vllm:request_success_total", finished_reason="length") == 4
    assert metric(dm, "vllm:time_to_first_token_seconds_count") == 4
    assert metric(dm, "vllm:inter_token_latency_seconds_count") == 4 * 7
    assert metric(dm, "vllm:inter_token_latency_seconds_sum") >= 4 * 7 * 0.045
    assert metric(dm, "vllm:num_requests_running") == 0 and metric(dm, "vllm:num_requests_waiting") == 0
    pm = scrape(lab, ph["data_ip"], P_API)
    assert metric(pm, "vllm:prompt_tokens_total") == 40 and metric(pm, "vllm:generation_tokens_total") == 4
    assert metric(pm, "vllm:kv_cache_usage_perc") == 0  # D pulled everything, P freed it
    # a prefill no D pulls: P holds its blocks (usage > 0) until the abort timeout force-frees them
    lab.guard(ph["data_ip"])
    r = subprocess.run(["curl", "-sS", "-m", "10", f"http://{ph['data_ip']}:{P_API}/v1/completions",
                        "-H", "Content-Type: application/json", "-d", json.dumps({
                            "prompt": prompt, "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}})],
                       capture_output=True, text=True, check=True)
    assert json.loads(r.stdout)["kv_transfer_params"]["do_remote_prefill"] is True, r.stdout
    assert metric(scrape(lab, ph["data_ip"], P_API), "vllm:kv_cache_usage_perc") > 0
    units.wait_log(p, "lab-fidelity-p", r"Force freed expired request: cmpl-", timeout=ABORT_TIMEOUT + 20)
    assert metric(scrape(lab, ph["data_ip"], P_API), "vllm:kv_cache_usage_perc") == 0
