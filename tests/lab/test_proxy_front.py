"""The proxy tier (issue 37): vllm_pd_proxy_front: haproxy on cluster lab60 of lab/gen-inventory (1P1D, the real
example proxy of the lab's release). The deploy puts HAProxy (vllm-pd-front.service) on the proxy port in front of
two proxy processes on loopback, each answering its /healthcheck, in place of the single proxy a first deploy started
(the run says how long the proxy port refused connections meanwhile); a completion goes through the front; a converged
run changes nothing; HAProxy accepts its configuration; a change of the proxy's arguments under a closed loop of 3
clients recycles every process (drained in HAProxy, restarted, set ready) with 0 failed requests; a kill -9 of one
proxy process under a few requests a second costs at most the requests in flight on it, and the process comes back
into HAProxy; the doctor checks HAProxy's unit and names a stopped process out of HAProxy (ProxyProcessDown). The
containers are removed at the end.
"""
import json
import re
import shutil
import time
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen
from conftest import Lab, own_lab

pytestmark = pytest.mark.lab

P, D = "pd-p60", "pd-d60"
PROCESSES = proxy_front.DEFAULT_PROCESSES
PORTS = proxy_front.process_ports(proxy_front.DEFAULT_BASE_PORT, PROCESSES)
RATE = 4.0

# run on the proxy host in one SSH call: kill -9 process 1, then watch HAProxy's view of it (its runtime API on the
# admin socket) and systemd's until HAProxy has it up again; prints the times in seconds after the kill
WATCH = r'''
import json, os, socket, subprocess, sys, time
SOCK, UNIT = sys.argv[1], sys.argv[2]
def stat():
    s = socket.socket(socket.AF_UNIX); s.connect(SOCK); s.sendall(b"show stat\n"); data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    lines = data.decode().splitlines(); head = lines[0].lstrip("# ").split(",")
    rows = [dict(zip(head, l.split(","))) for l in lines[1:] if l]
    return dict((r["svname"], r) for r in rows if r["svname"].startswith("proxy"))
def pid():
    return subprocess.check_output(["systemctl", "show", "-p", "MainPID", "--value", UNIT]).decode().strip()
old = pid()  # before the count: a request reaching the process between the count and the kill is not counted
before = stat(); t0 = time.monotonic(); os.kill(int(old), 9)
down = restart = up = None; status = ""
while time.monotonic() - t0 < 60:
    status = stat()["proxy1"]["status"]; t = time.monotonic() - t0
    if down is None and status.startswith("DOWN"):
        down = t
    if restart is None and pid() not in ("0", old):
        restart = t
    if down is not None and status == "UP":
        up = t
        break
    time.sleep(0.05)
print(json.dumps(dict(in_flight=int(before["proxy1"]["scur"]), down=down, restart=restart, up=up, status=status)))
'''

# run on the proxy host: HAProxy's status of each proxy process, as JSON
STATUS = r'''
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"show stat\n"); data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
lines = data.decode().splitlines(); head = lines[0].lstrip("# ").split(",")
rows = [dict(zip(head, l.split(","))) for l in lines[1:] if l]
print(json.dumps(dict((r["svname"], r["status"]) for r in rows if r["svname"].startswith("proxy"))))
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with own_lab(tmp_path_factory, 60, group_vars={"lab60": {"vllm_pd_proxy_front": "haproxy"}}) as lab:
        # a running cluster with the single proxy (the default) moves to the tier on its next deploy
        lab.playbook("playbooks/deploy_pd.yml", "-e", "vllm_pd_proxy_front=none")
        lab.single = dict(unit=lab.unit(P, "vllm-pd-proxy.service"), owner=lab.owner(P, 8000))
        lab.deploy = lab.playbook("playbooks/deploy_pd.yml")
        yield lab


def unit_of(lab, port):
    return [u for u in ("vllm-pd-front.service",) + tuple(proxy_front.process_units(PROCESSES)) if u in lab.owner(P, port)]


def test_deploy_puts_haproxy_on_the_proxy_port_in_front_of_the_processes(cluster):
    lab = cluster
    assert unit_of(lab, 8000) == ["vllm-pd-front.service"], lab.owner(P, 8000)
    listening = lab.listening(P)
    health = releases.runtime("0.23.0.post1")["proxy_health_route"]  # the lab's release (release.yml)
    for k, port in enumerate(PORTS, 1):
        assert ("127.0.0.1", port) in listening, listening
        assert unit_of(lab, port) == [f"vllm-pd-proxy@{k}.service"], lab.owner(P, port)
        answer = lab.run(P, f"python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:{port}{health}\","
                            f" timeout=10).read().decode())'").stdout
        assert json.loads(answer)["status"], answer
    # nothing else of the single proxy runs, and HAProxy accepts the configuration it runs with
    assert lab.unit(P, "vllm-pd-proxy.service")[1] != "active"
    assert lab.run(P, f"haproxy -c -f {proxy_front.FRONT_CONFIG}").rc == 0
    # the deploy's smoke request (KV moved, the same text as P alone) went through the front; and one more here
    assert "Prove KV moves with one short request" in lab.deploy.stdout
    ip = lab.hosts[P]["data_ip"]
    lab.guard(ip)
    req = urllib.request.Request(f"http://{ip}:8000/v1/completions", headers={"Content-Type": "application/json"},
                                 data=json.dumps({"prompt": "front", "max_tokens": 4, "temperature": 0}).encode())
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200 and json.loads(r.read())["choices"][0]["text"]
    # HAProxy's Prometheus exporter on the proxy host's address: each process up (1), the file_sd job's target
    with urllib.request.urlopen(f"http://{ip}:{proxy_front.DEFAULT_METRICS_PORT}{proxy_front.METRICS_PATH}", timeout=30) as r:
        text = r.read().decode()
    for k in range(1, PROCESSES + 1):
        assert re.search(r'^haproxy_server_status\{proxy="%s",server="proxy%d",state="UP"\} 1$' % (proxy_front.BACKEND, k),
                         text, re.M), [line for line in text.splitlines() if line.startswith("haproxy_server_status")]


def test_a_running_single_proxy_moves_to_the_tier_and_the_run_says_how_long_the_port_refused(cluster):
    lab = cluster
    assert lab.single["unit"] == ("enabled", "active") and "vllm-pd-proxy.service" in lab.single["owner"], lab.single
    text = " ".join(lab.deploy.stdout.split())
    m = re.search(r"cluster lab60, host pd-p60: the proxy tier took proxy port 8000 over from the single proxy "
                  r"\(vllm-pd-proxy.service, stopped and disabled\); the port refused connections for ([\d.]+) s", text)
    assert m, lab.deploy.stdout[-4000:]
    print(f"\nthe proxy port refused connections for {m[1]} s while HAProxy took it over")
    # from the stop of the single proxy to HAProxy's listen, in one module run: no task of the run in between
    assert 0 < float(m[1]) < 5
    assert lab.unit(P, "vllm-pd-proxy.service") == ("disabled", "inactive")


def test_a_converged_run_changes_nothing(cluster):
    r = cluster.playbook("playbooks/deploy_pd.yml")
    assert set(cluster.changed(r).values()) == {0}, cluster.changed(r)


def pids(lab):
    return {u: lab.run(P, f"systemctl show -p MainPID --value {u}").stdout.strip() for u in proxy_front.process_units(PROCESSES)}


def test_a_change_of_the_proxy_arguments_under_a_closed_loop_recycles_each_process_without_a_failed_request(cluster):
    lab = cluster
    base = Path(lab.inventory)
    changed = base.parent / f"{base.name}-proxy-args"
    shutil.copytree(base, changed)
    # a setting of the example proxy every release has: the processes' command changes, the members do not
    (changed / "group_vars" / "all" / "change.yml").write_text("proxy_extra_args: [--waiting-retry-interval, '0.5']\n")
    before = pids(lab)
    spec = loadgen.LoadSpec(f"http://{lab.hosts[P]['data_ip']}:8000", rate=None, concurrency=3, count=10 ** 6,
                            max_tokens=8, timeout=60, guard=lab.guard)
    bg = loadgen.Background(spec).start()
    inv = Lab(changed)
    try:
        time.sleep(2)  # the loop runs before the deploy touches anything
        t0 = time.monotonic()
        r = inv.playbook("playbooks/deploy_pd.yml", "-v", check=False)  # -v: the drains' results
        took = time.monotonic() - t0
    finally:
        result = bg.stop_and_wait()
        inv.close()
    print(f"\nproxy arguments changed under 3 closed-loop clients: deploy {took:.1f} s rc {r.returncode}; completed "
          f"{result['completed']} failed {result['failed']} in {result['duration_s']:.1f} s; errors {result['errors'][:3]}")
    assert r.returncode == 0, Lab.failures(r)
    after = pids(lab)
    assert all(after[u] not in ("0", before[u]) for u in before), (before, after)
    assert result["failed"] == 0, result["errors"]
    assert result["completed"] >= 20, result
    # each process was drained in the running HAProxy (not skipped, not a no-op) before its restart, and is ready
    # and UP again
    drains = [t for t in r.stdout.split("\nTASK [") if t.startswith("vllm_pd.ascend.proxy : Drain the proxy process")]
    print("\n".join(d[:600] for d in drains))
    assert len(drains) == PROCESSES, r.stdout[-4000:]
    assert all("front: running" in d and "after: drain" in d and "before: ready" in d for d in drains), drains
    status = lab.ssh(P, "python3 -c " + _quote(STATUS) + f" {proxy_front.ADMIN_SOCKET}").stdout
    assert all(s == "UP" for s in json.loads(status.strip().splitlines()[-1]).values()), status


def test_kill_9_of_one_proxy_process_under_load_costs_only_its_requests_in_flight(cluster):
    lab = cluster
    ip = lab.hosts[P]["data_ip"]
    spec = loadgen.LoadSpec(f"http://{ip}:8000", rate=RATE, count=int(RATE * 120), max_tokens=8, timeout=60,
                            guard=lab.guard)
    bg = loadgen.Background(spec).start()
    try:
        time.sleep(4)
        watch = lab.ssh(P, "python3 -c " + _quote(WATCH) + f" {proxy_front.ADMIN_SOCKET} vllm-pd-proxy@1.service")
        seen = json.loads(watch.stdout.strip().splitlines()[-1])
        time.sleep(4)  # traffic goes on after the process is back
    finally:
        result = bg.stop_and_wait()
    print(f"\nkill -9 of vllm-pd-proxy@1 under {RATE}/s: {seen}; completed {result['completed']} failed "
          f"{result['failed']} in {result['duration_s']:.1f} s; errors {result['errors'][:3]}")
    assert seen["up"] is not None, seen
    assert seen["down"] is not None and seen["down"] <= 2.5, seen
    assert seen["restart"] is not None, seen
    # only the requests in flight on the killed process may fail (read just before the kill; 1 more for a request
    # that reached it between that read and the kill)
    assert result["failed"] <= seen["in_flight"] + 1, result
    assert result["completed"] >= 20, result
    assert lab.unit(P, "vllm-pd-proxy@1.service")[1] == "active"


def _quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def test_the_preflight_names_a_proxy_host_without_haproxy_before_any_change(cluster):
    lab = cluster
    lab.run(P, "chmod a-x /usr/sbin/haproxy")
    try:
        r = lab.playbook("playbooks/deploy_pd.yml", check=False)
    finally:
        lab.run(P, "chmod a+x /usr/sbin/haproxy")
    assert r.returncode != 0
    failed = lab.failures(r)
    assert "ProxyFrontMissing: cluster lab60, host pd-p60" in failed and "HAProxy on an air-gapped host" in failed, failed
    assert set(lab.changed(r).values()) == {0}, lab.changed(r)


def test_the_doctor_reads_haproxy_and_names_a_process_out_of_it(cluster, tmp_path):
    """The doctor checks HAProxy's unit, not the single proxy's (disabled with the tier), and reads each process's
    state from HAProxy's runtime API: a stopped process is capacity lost, named with its unit; the others serve."""
    lab = cluster
    lab.run(P, "systemctl stop vllm-pd-proxy@2.service")
    deadline = time.time() + 30
    while json.loads(lab.run(P, "python3 -c " + _quote(STATUS) + f" {proxy_front.ADMIN_SOCKET}").stdout)["proxy2"] == "UP":
        assert time.time() < deadline, "HAProxy still has the stopped process UP"
        time.sleep(0.5)
    js = tmp_path / "doctor.json"
    r = lab.playbook("playbooks/doctor.yml", "-e", f"vllm_pd_doctor_report={tmp_path / 'doctor.html'}",
                     "-e", f"vllm_pd_doctor_json={js}", check=False)
    data = json.loads(js.read_text())
    findings = [(f["check"], f["severity"], f["title"]) for f in data["findings"]
                if f["cluster"] == "lab60" and f["severity"] != "info"]
    assert findings == [("ProxyProcessDown", "warning", "1 of 2 processes of the proxy on pd-p60 are out of HAProxy")], (
        findings, r.stdout[-3000:])
    card = next(h for c in data["clusters"] if c["name"] == "lab60" for h in c["hosts"] if h["name"] == P)["proxy"]
    assert card["unit"] == "vllm-pd-front.service" and card["active"], card
    assert [(x["unit"], x["status"]) for x in card["tier"]["processes"]] == [
        ("vllm-pd-proxy@1.service", "UP"), ("vllm-pd-proxy@2.service", "DOWN")], card
    assert re.search(r"proxy1\s+-\s+UP", r.stdout) and re.search(r"proxy2\s+-\s+DOWN", r.stdout), r.stdout[-3000:]
