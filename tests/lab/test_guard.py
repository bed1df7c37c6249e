"""Guarantees that outlive the playbook (issue 13): the start guard, restarts, reboots and the
reachability check, on cluster lab9 of lab/gen-inventory (hosts pd-p9, pd-d9); its containers are
removed at the end.

Order matters: the unreachable address first (nothing may start), then a deploy, a start that waits
for the data address (as at boot), a refused restart,
a crash, and the reboot of P with Grafana allowed (last: it restarts the container).
"""
import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from conftest import own_lab

P, D = "pd-p9", "pd-d9"
KV_PORT = 28002
GROUP = range(KV_PORT, KV_PORT + 8)
# not the session's `lab` fixture: that one brings up inventory/lab (lab1), which is not ours
pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def g(tmp_path_factory):
    with own_lab(tmp_path_factory, 9) as g:
        yield g


def active(g, host, unit):
    """ActiveState of UNIT on HOST (testinfra); "" while HOST does not answer (restarting)."""
    try:
        return g.unit(host, unit)[1]
    except (AssertionError, RuntimeError):  # testinfra: a failed command / ssh could not connect (rc 255)
        return ""


def up(g, host):
    """HOST answers over SSH (testinfra runs a no-op; it raises RuntimeError when ssh cannot connect)."""
    try:
        return g.run(host, "true", check=False).rc == 0
    except RuntimeError:
        return False


def request(g, tries=1):
    """One completion through the proxy on P; True when it answered with text."""
    body = json.dumps({"model": "/models/lab-model", "prompt": "guard", "max_tokens": 4})
    url = f"http://{g.hosts[P]['data_ip']}:8000/v1/completions"
    script = (f"import urllib.request\nreq = urllib.request.Request({url!r}, data={body!r}.encode(), "
              f"headers={{'Content-Type': 'application/json'}})\n"
              f"assert b'text' in urllib.request.urlopen(req, timeout=30).read()\n")
    for _attempt in range(tries):
        try:
            if g.run(P, "python3 -c " + shlex.quote(script), check=False).rc == 0:
                return True
        except RuntimeError:  # ssh could not connect (P restarting)
            pass
        time.sleep(2)
    return False


def group_ports(g):
    """The ports of the kv_port group that something listens on, on P (testinfra)."""
    return g.ports(P) & set(GROUP)


def test_nics_survive_a_container_restart(g):
    # (run on pd-d9: the reboot of P comes last)
    subprocess.run(["podman", "restart", "-t", "5", D], check=True, capture_output=True)
    g.forget(D)
    deadline = time.time() + 60
    while not up(g, D):
        assert time.time() < deadline, "pd-d9 did not come back"
        time.sleep(1)
    host = g.host(D)
    for nic in ("mgmt0", "data0"):
        assert host.interface(nic).exists, nic
    assert g.hosts[D]["data_ip"] in host.interface("data0").addresses
    assert g.hosts[D]["mgmt_ip"] in host.interface("mgmt0").addresses
    docker0 = g.run(D, "ip -o -4 addr show dev docker0").stdout  # the prefix too: addresses has none
    assert re.search(r" docker0\s+inet 172\.17\.0\.1/16", docker0), docker0
    g.up()  # default route and mgmt0 filter again (they live in the netns only)


def test_unreachable_explicit_address_is_refused_before_any_start(g):
    mgmt = g.hosts[P]["mgmt_ip"]
    hv = Path(g.inventory) / "host_vars" / f"{P}.yml"
    hv.write_text(f"---\nvllm_pd_host_ip: {mgmt}\n")
    try:
        r = g.playbook("playbooks/deploy_pd.yml", check=False)
    finally:
        hv.unlink()
    assert r.returncode != 0
    out = r.stdout
    d_ip = g.hosts[D]["data_ip"]
    m = re.search(r"decode host pd-d9, address (\S+) \(on (\w+)\), cannot reach prefill host pd-p9 at (\S+) "
                  r"\(on (\w+)\), port \d+: (.*?) after ([\d.]+) s", out)
    assert m, out[-5000:]
    assert m.groups()[:4] == (d_ip, "data0", mgmt, "mgmt0"), m.groups()
    assert float(m.group(6)) < 5
    for host in (P, D):
        # a listing (testinfra reads one named unit at a time): no engine or proxy unit of any name is active
        units = g.run(host, "systemctl list-units --plain --no-legend 'vllm-pd-prefill*' 'vllm-pd-decode*' "
                            "'vllm-pd-proxy*'").stdout
        assert " active " not in units, f"{host}: {units}"
    for host, unit in ((P, "vllm-pd-prefill.service"), (D, "vllm-pd-decode.service"), (P, "vllm-pd-proxy.service")):
        assert active(g, host, unit) != "active", (host, unit)


def test_deploy_installs_guarded_enabled_units(g):
    r = g.playbook("playbooks/deploy_pd.yml", check=False)
    assert r.returncode == 0, r.stdout[-5000:]
    for host, unit in ((P, "vllm-pd-prefill"), (D, "vllm-pd-decode"), (P, "vllm-pd-proxy")):
        props = g.host(host).service(unit).systemd_properties
        assert "start-guard" in props["ExecStartPre"], props["ExecStartPre"]
        assert (props["Restart"], props["UnitFileState"], props["ActiveState"]) == ("on-failure", "enabled", "active"), (
            host, unit, props["Restart"], props["UnitFileState"], props["ActiveState"])
    assert g.host(P).service("vllm-pd-prefill").systemd_properties["StartLimitBurst"] == "5"


def test_start_waits_for_the_data_address(g):
    """The data NIC gets its address after the unit was started (as at boot): the guard waits for
    VLLM_HOST_IP, then the engine starts and serves. Done with podman exec (SSH uses that address)."""
    ip = g.hosts[P]["data_ip"]

    def inside(cmd):
        return subprocess.run(["podman", "exec", P, "sh", "-c", cmd], capture_output=True, text=True, check=True)
    since = inside("date +%s").stdout.strip()
    inside(f"systemctl stop vllm-pd-prefill && ip addr del {ip}/24 dev data0 && "
           f"systemctl start --no-block vllm-pd-prefill && sleep 4 && ip addr add {ip}/24 dev data0")
    g.forget(P)
    deadline = time.time() + 90
    while active(g, P, "vllm-pd-prefill") != "active" or not request(g):
        assert time.time() < deadline, inside("journalctl -u vllm-pd-prefill -n 20 -o cat").stdout
        time.sleep(2)
    log = inside(f"journalctl -u vllm-pd-prefill --since @{since} -o cat --no-pager").stdout
    m = re.search(r"vllm-pd start guard: vllm-pd-prefill.service waited ([\d.]+) s for VLLM_HOST_IP " + re.escape(ip), log)
    assert m and 3 <= float(m.group(1)) <= 30, log
    assert "refused" not in log


def test_restart_while_a_foreign_process_holds_a_group_port_is_refused(g):
    g.playbook("playbooks/stop_pd.yml")
    g.fixtures(P, ["conflict_process"], lab_conflict_process_port=28006)
    host = g.host(P)
    pid = host.file("/run/vllm-pd-lab/conflict-process-28006.pid").content_string.strip()
    try:
        assert f"pid={pid}," in g.run(P, "ss -Htlnp 'sport = :28006'").stdout  # the fixture holds the port
        since = host.check_output("date +%s")
        r = g.run(P, "systemctl restart vllm-pd-prefill", check=False)
        assert r.rc != 0
        assert host.process.filter(pid=int(pid)), "the guard touched the holder"
        log = g.run(P, f"journalctl -u vllm-pd-prefill --since @{since} -o cat --no-pager").stdout
        lines = [x for x in log.splitlines() if "vllm-pd start guard: refused" in x]
        assert lines, log
        line = lines[0]
        assert "port 28006 (kv_port group)" in line and f"pid {pid}" in line and "fix:" in line, line
        assert active(g, P, "vllm-pd-prefill") != "active"
    finally:
        g.fixtures(P, state="absent")
    r = g.playbook("playbooks/deploy_pd.yml", check=False)
    assert r.returncode == 0, r.stdout[-5000:]


def test_kill_9_of_prefill_restarts_it_and_requests_flow_again(g):
    assert request(g, tries=3)

    def main_pid():
        return g.host(P).service("vllm-pd-prefill").systemd_properties["MainPID"]
    before = main_pid()
    assert before != "0" and g.host(P).process.filter(pid=int(before)), before
    g.run(P, f"kill -9 {before}")
    deadline = time.time() + 90
    while True:
        now = main_pid()
        if now not in ("0", before) and active(g, P, "vllm-pd-prefill") == "active" and request(g):
            break
        assert time.time() < deadline, g.run(P, "journalctl -u vllm-pd-prefill -n 30 -o cat").stdout
        time.sleep(2)
    # D was not restarted: it connects to P's new side channel lazily
    assert active(g, D, "vllm-pd-decode") == "active"


def test_reboot_of_p_with_an_enabled_allowed_holder(g):
    g.playbook("playbooks/stop_pd.yml")
    g.fixtures(P, ["conflict_service"])  # grafana-server.service, enabled, on 28005
    assert g.unit(P, "grafana-server.service") == ("enabled", "active")
    assert "grafana-server.service" in g.owner(P, 28005)
    r = g.playbook("playbooks/deploy_pd.yml", check=False)
    assert r.returncode == 0, r.stdout[-5000:]
    # the preflight stopped it and (issue 13 item 2) keeps it from starting at boot
    assert g.unit(P, "grafana-server.service") == ("disabled", "inactive")
    subprocess.run(["podman", "restart", "-t", "5", P], check=True, capture_output=True)
    g.forget(P)
    deadline = time.time() + 120
    while True:
        ok = up(g, P)
        if ok and active(g, P, "vllm-pd-prefill") == "active" and len(group_ports(g)) == 8 and request(g):
            break
        assert time.time() < deadline, (g.run(P, "journalctl -b -u vllm-pd-prefill -o cat -n 30", check=False).stdout
                                        if ok else "P did not come back")
        time.sleep(2)
    assert sorted(group_ports(g)) == list(GROUP)
    owners = {port: g.owner(P, port) for port in GROUP}
    assert all("vllm-pd-prefill.service" in v and "grafana" not in v for v in owners.values()), owners
    assert g.unit(P, "grafana-server.service") == ("disabled", "inactive")
    g.playbook("playbooks/stop_pd.yml", "-e", "vllm_pd_restore_services=true")
    assert g.unit(P, "grafana-server.service") == ("enabled", "active")
    g.fixtures(P, state="absent")
    g.up()
