"""The real example proxy's own faults on a running 2P2D cluster (upstream-compat.md part 1 #3, #4):

- a client that disconnects while P computes leaves the 0.23.0.post1 proxy's request count above 0 for good: a
  rolling change then stops before it removes anything, naming ProxyCountLeaked; run again with
  vllm_pd_proxy_recover=restart, the proxy restarts (its members idle) and the change rolls;
- a retire of a D whose join was interrupted (added to the proxy, not admitted yet) waits for the admission before
  it removes it (a remove of a waiting member kills the proxy's listener), with 0 failed requests under load; a
  later add of the same D is admitted, so the listener lives.

Cluster lab56 of lab/gen-inventory (2P2D, the lab's real example proxy with a listener pass every 3 s, so an added
member waits a while). The containers are removed at the end.
"""
import json
import shutil
import socket
import time
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen
from conftest import Lab, own_lab

pytestmark = pytest.mark.lab

P1, P2, D1, D2 = "pd-p56-1", "pd-p56-2", "pd-d56-1", "pd-d56-2"
ROLLING = ("-e", "vllm_pd_rollout=rolling")
MARKER = "/var/lib/vllm-pd/proxy-isolated.json"


def variant(base, name, change=None, hosts=None):
    out = base.parent / f"{base.name}-{name}"
    shutil.copytree(base, out)
    if change:
        (out / "group_vars" / "all" / "change.yml").write_text(change)
    if hosts:
        (out / "hosts.yml").write_text(hosts)
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    day2 = {"proxy_extra_args": ["--waiting-retry-interval", "3"]}
    with own_lab(tmp_path_factory, 56, prefill=2, decode=2, group_vars={"lab56": day2}) as lab:
        lab.playbook("playbooks/deploy_pd.yml")
        yield lab


def proxy(lab):
    ip = lab.hosts[P1]["data_ip"]
    lab.guard(ip)
    return ip


def get(lab, path):
    with urllib.request.urlopen(f"http://{proxy(lab)}:8000{path}", timeout=10) as r:
        return json.loads(r.read())


def members(lab):
    req = urllib.request.Request(f"http://{proxy(lab)}:8000/instances/add", data=b'{"type": "prefill", "instances": []}',
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        answer = json.loads(r.read())
    return sorted(answer["current_prefill_instances"]), sorted(answer["current_decode_instances"])


def all_members(lab):
    return (sorted(f"{lab.hosts[h]['data_ip']}:8100" for h in (P1, P2)),
            sorted(f"{lab.hosts[h]['data_ip']}:8200" for h in (D1, D2)))


def pid(lab, host, unit):
    return lab.host(host).service(unit).systemd_properties["MainPID"]


def disconnect_during_prefill(lab):
    """A client that sends a long prompt (P computes 2 ms a token) and goes away after 1 s, while P computes."""
    body = json.dumps({"prompt": " ".join(["word"] * 3000), "max_tokens": 4}).encode()
    s = socket.create_connection((proxy(lab), 8000), timeout=5)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(1.0)
    s.close()


def test_a_count_leaked_by_a_client_gone_during_prefill_is_named_then_a_restart_recovers(fleet):
    lab = fleet
    before = {"proxy": pid(lab, P1, "vllm-pd-proxy.service"), D1: pid(lab, D1, "vllm-pd-decode.service")}
    disconnect_during_prefill(lab)
    time.sleep(8)                                   # P has finished; the proxy still counts the request
    assert get(lab, "/healthcheck")["request_num"] == 1
    inv = Lab(variant(Path(lab.inventory), "d_flag", "decode_extra_args: [--max-num-seqs, '48']\n"))
    try:
        r = inv.playbook("playbooks/deploy_pd.yml", *ROLLING, check=False)
        text = " ".join(r.stdout.split())
        assert r.returncode != 0 and "ProxyCountLeaked: cluster lab56" in text, r.stdout[-5000:]
        assert "vllm_pd_proxy_recover=restart" in text
        # nothing was taken out, nothing restarted
        assert members(lab) == all_members(lab)
        assert pid(lab, D1, "vllm-pd-decode.service") == before[D1]
        assert pid(lab, P1, "vllm-pd-proxy.service") == before["proxy"]

        r = inv.playbook("playbooks/deploy_pd.yml", *ROLLING, "-e", "vllm_pd_proxy_recover=restart")
        assert pid(lab, P1, "vllm-pd-proxy.service") != before["proxy"]
        assert pid(lab, D1, "vllm-pd-decode.service") != before[D1]
        assert "--max-num-seqs 48" in lab.run(D2, "cat /proc/$(systemctl show -p MainPID --value vllm-pd-decode)/cmdline"
                                                  " | tr '\\0' ' '").stdout
        assert members(lab) == all_members(lab)
        assert get(lab, "/healthcheck")["request_num"] == 0
        assert set(inv.changed(inv.playbook("playbooks/deploy_pd.yml", *ROLLING)).values()) == {0}
    finally:
        inv.close()


def test_a_retire_after_an_interrupted_join_waits_for_the_admission_and_a_later_add_is_admitted(fleet):
    lab = fleet
    base = Path(lab.inventory)
    # where the test before left the cluster
    start = Lab(variant(base, "d_flag2", "decode_extra_args: [--max-num-seqs, '48']\n"))
    start.playbook("playbooks/deploy_pd.yml", *ROLLING)
    full = (base / "hosts.yml").read_text()
    retired = full.replace(f"        {D2}: {{ansible_host:", f"        {D2}: {{vllm_pd_state: absent, ansible_host:")
    gone = Lab(variant(base, "d2_absent", "decode_extra_args: [--max-num-seqs, '48']\n", retired))
    d2 = f"{lab.hosts[D2]['data_ip']}:8200"
    proxy_pid = str(pid(lab, P1, "vllm-pd-proxy.service"))
    # an interrupted join: D2 out of the proxy (idle: removed at once), added again and recorded, not admitted yet
    req = urllib.request.Request(f"http://{proxy(lab)}:8000/instances/remove",
                                 data=json.dumps({"type": "decode", "instances": [d2]}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).close()
    assert d2 not in members(lab)[1]
    record = {"pid": proxy_pid, "isolated": {}, "joining": {"decode": {d2: time.time()}}}
    lab.run(P1, f"mkdir -p /var/lib/vllm-pd && echo '{json.dumps(record)}' > {MARKER}")
    req = urllib.request.Request(f"http://{proxy(lab)}:8000/instances/add",
                                 data=json.dumps({"type": "decode", "instances": [d2]}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).close()
    spec = loadgen.LoadSpec(f"http://{proxy(lab)}:8000", rate=2.0, count=2400, max_tokens=8, timeout=60, guard=lab.guard)
    bg = loadgen.Background(spec).start()
    try:
        r = gone.playbook("playbooks/deploy_pd.yml", check=False)
    finally:
        result = bg.stop_and_wait()
    print(f"\nretire after an interrupted join: completed {result['completed']} failed {result['failed']}; "
          f"errors {result['errors'][:3]}")
    assert r.returncode == 0, r.stdout[-6000:]
    assert result["failed"] == 0 and result["completed"] >= 20, result["errors"][:5]
    assert lab.unit(D2, "vllm-pd-decode.service")[1] != "active"
    # listed only while isolated (the proxy drops it when idle at a pass); then gone
    deadline = time.monotonic() + 30
    while d2 in members(lab)[1] and time.monotonic() < deadline:
        time.sleep(1)
    assert d2 not in members(lab)[1]
    journal = lab.run(P1, "journalctl -u vllm-pd-proxy --no-pager -o cat").stdout
    assert "KeyError" not in journal, journal[-3000:]
    # the add of the same D: the listener admits it
    gone.close()
    again = Lab(variant(base, "d2_back", "decode_extra_args: [--max-num-seqs, '48']\n"))
    try:
        again.playbook("playbooks/deploy_pd.yml")
    finally:
        again.close()
        start.close()
    assert members(lab) == all_members(lab)
    assert str(pid(lab, P1, "vllm-pd-proxy.service")) == proxy_pid
