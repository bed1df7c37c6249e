"""Day 2 and the benchmark on vllm-ascend 0.18.0 with that release's own example proxy. Cluster lab57 of
lab/gen-inventory (1P2D, hosts pd-p57, pd-d57-1, pd-d57-2), every stand-in installed as 0.18.0 and the proxy
taken from the 0.18.0 sdist (lab/install-proxy), removed at the end. What differs from 0.23 and is proved here:
- the preflight reads 0.18.0 and the proxy runs 0.18's script (its /healthcheck has no request_num);
- the benchmark parses 0.18's KV line ("took X ms (G groups, B blocks). local_ip ...") into times per P -> D pair;
- a rolling decode change under load rejoins each D through 0.18's proxy (it un-taints a member on add);
- the proxy tier (issue 37) runs 0.18's proxy: the single proxy hands the port to HAProxy, and a change of the
  proxy's arguments under a closed loop recycles each process, ready once 0.18's /healthcheck counts its members.
"""
import hashlib
import json
import re
import shutil
import subprocess
import tarfile
import urllib.request
from pathlib import Path

import pytest
import yaml

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front, releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen
from conftest import ROOT, Lab, own_lab

pytestmark = pytest.mark.lab

RELEASE = "0.18.0"
P, D1, D2 = "pd-p57", "pd-d57-1", "pd-d57-2"
PROXY = "/opt/vllm-ascend/examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py"
TP = 8  # both sides of the lab clusters: one KV line per rank and request
REQUESTS = 20
RATE = 1.5
# the lab's engine env plus one variable on D only (not one of those P and D must share)
D_ENV = "decode_env: \"{{ vllm_pd_engine_env | combine({'LAB_ROLL_MARK': '18'}) }}\"\n"


@pytest.fixture(scope="module")
def rel18(tmp_path_factory):
    # the inventory names the release: a preflight that read another one fails the deploy (ReleaseMismatch)
    gv = {"vllm_pd_vllm_ascend_version": RELEASE, "proxy_extra_args": ["--waiting-retry-interval", "0.2"]}
    with own_lab(tmp_path_factory, 57, prefill=1, decode=2, release=RELEASE, group_vars={"lab57": gv}) as lab:
        r = lab.playbook("playbooks/deploy_pd.yml", check=False)
        assert r.returncode == 0, r.stdout[-5000:]
        lab.deploy = r
        yield lab


def url(lab, path=""):
    ip = lab.hosts[P]["data_ip"]
    lab.guard(ip)
    return f"http://{ip}:8000{path}"


def healthcheck(lab):
    with urllib.request.urlopen(url(lab, "/healthcheck"), timeout=10) as r:
        return json.loads(r.read())


def members(lab):
    req = urllib.request.Request(url(lab, "/instances/add"), data=b'{"type": "prefill", "instances": []}',
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        answer = json.loads(r.read())
    return sorted(answer["current_prefill_instances"]), sorted(answer["current_decode_instances"])


def main_pid(lab, host, unit):
    return lab.host(host).service(unit).systemd_properties["MainPID"]


def joined(result):
    """The hosts whose instance the rolling run required back in the proxy (the join step ran and passed), in order."""
    out = []
    for block in result.stdout.split("\nTASK [")[1:]:
        if "Put the instance back into its proxy, within" in block.split("\n", 1)[0]:
            # a delegated result reads "changed: [HOST -> DELEGATE(ITS ansible_host)]"
            out += re.findall(rf"^(?:ok|changed): \[(\S+) -> {P}[(\]]", block, re.M)
    return out


def sdist_proxy_digest(release):
    """sha256 of the example proxy in RELEASE's sdist (the cache scripts/fetch-upstream keeps)."""
    r = subprocess.run([str(ROOT / "scripts" / "fetch-upstream"), f"vllm-ascend=={release}"], capture_output=True,
                       text=True, check=True)
    with tarfile.open(r.stdout.split()[-1]) as tar:
        top = tar.getnames()[0].split("/")[0]
        return hashlib.sha256(tar.extractfile(f"{top}/{releases.RELEASES[release]['proxy_path']}").read()).hexdigest()


def test_deploys_as_0_18_with_its_example_proxy(rel18):
    lab = rel18
    assert "KV moved P -> D for" in lab.deploy.stdout, lab.deploy.stdout[-3000:]
    code = "import importlib.metadata as m; print(m.version('vllm-ascend'))"
    for h in (P, D1, D2):
        assert lab.run(h, f"/usr/bin/python3 -c \"{code}\"").stdout.split() == [RELEASE]
    # the proxy unit runs the file of the 0.18.0 sdist, and answers as 0.18's script does (0.23 adds request_num)
    cmdline = lab.run(P, f"tr '\\0' ' ' < /proc/{main_pid(lab, P, 'vllm-pd-proxy.service')}/cmdline").stdout
    assert PROXY in cmdline, cmdline
    assert lab.run(P, f"sha256sum {PROXY}").stdout.split()[0] == sdist_proxy_digest(RELEASE)
    assert healthcheck(lab) == {"status": "ok", "prefill_instances": 1, "decode_instances": 2}


def test_benchmark_reads_the_0_18_kv_line_per_pair(rel18, tmp_path):
    lab = rel18
    out = tmp_path / "results"
    # a KV bound makes a D that logged no parsable KV line a finding (BenchKvTransferUnseen)
    r = lab.playbook("playbooks/benchmark.yml", "-e", json.dumps({
        "vllm_pd_bench_dir": str(out), "vllm_pd_bench_requests": REQUESTS, "vllm_pd_bench_warmup": 2,
        "vllm_pd_slo_kv_transfer_ms": 60000}), check=False)
    (run,) = [p for p in (out / "lab57").glob("*.json") if p.name != "baseline.json"]
    rec = json.loads(run.read_text())
    assert r.returncode == 0 and rec["passed"] and rec["findings"] == [], (rec["findings"], r.stdout[-3000:])
    assert rec["result"]["completed"] == REQUESTS and rec["result"]["failed"] == 0
    assert not rec.get("kv_unseen"), rec.get("kv_unseen")
    pairs = {p["pair"]: p for p in rec["kv_transfer"]}
    assert set(pairs) == {f"{P} -> {D1}", f"{P} -> {D2}"}, pairs
    for d, name in ((D1, f"{P} -> {D1}"), (D2, f"{P} -> {D2}")):
        assert pairs[name]["decode_address"] == lab.hosts[d]["data_ip"] and pairs[name]["requests"] > 0
        assert pairs[name]["ms"]["n"] == pairs[name]["requests"] * TP and pairs[name]["ms"]["p99"] is not None
    # every measured request's transfer, read from 0.18's line
    assert sum(p["requests"] for p in pairs.values()) == REQUESTS
    journal = lab.run(D1, "journalctl -u vllm-pd-decode.service --no-pager -o cat").stdout
    assert " groups, " in journal and " blocks). local_ip " in journal, journal[-2000:]


def test_a_rolling_decode_change_rejoins_through_the_0_18_proxy_under_load(rel18):
    lab = rel18
    before = {h: main_pid(lab, h, f"vllm-pd-{k}.service") for h, k in ((P, "prefill"), (D1, "decode"), (D2, "decode"))}
    proxy_pid, all_members = main_pid(lab, P, "vllm-pd-proxy.service"), members(lab)
    base = Path(lab.inventory)
    changed = base.parent / f"{base.name}-d_env"
    shutil.copytree(base, changed)
    (changed / "group_vars" / "all" / "change.yml").write_text(D_ENV)
    changed = Lab(changed)
    spec = loadgen.LoadSpec(url(lab), rate=RATE, count=int(RATE * 900), max_tokens=8, timeout=60, guard=lab.guard)
    bg = loadgen.Background(spec).start()
    try:
        r = changed.playbook("playbooks/deploy_pd.yml", "-e", "vllm_pd_rollout=rolling", check=False)
    finally:
        result = bg.stop_and_wait()
        changed.close()
    print(f"\nroll decode_env on 1P2D (0.18.0): completed {result['completed']} failed {result['failed']} in "
          f"{result['duration_s']:.1f} s; errors {result['errors'][:3]}")
    assert r.returncode == 0 and "ProxyRejoinTimeout: cluster" not in r.stdout, r.stdout[-5000:]
    # the join step ran for each D (a D it could not put back fails the run: ProxyRejoinTimeout)
    assert sorted(joined(r)) == [D1, D2], r.stdout[-5000:]
    assert result["failed"] == 0 and result["completed"] >= 20, result
    assert main_pid(lab, P, "vllm-pd-prefill.service") == before[P]
    assert main_pid(lab, P, "vllm-pd-proxy.service") == proxy_pid
    for h in (D1, D2):
        pid = main_pid(lab, h, "vllm-pd-decode.service")
        assert pid != before[h]
        assert "LAB_ROLL_MARK=18" in lab.run(h, f"tr '\\0' '\\n' < /proc/{pid}/environ").stdout.splitlines()
    # both D are back in the same proxy process, which serves with them
    assert members(lab) == all_members
    assert healthcheck(lab) == {"status": "ok", "prefill_instances": 1, "decode_instances": 2}


def tier_inventory(lab, name, wait_interval):
    """LAB's inventory with the proxy tier and the proxy's --waiting-retry-interval WAIT_INTERVAL (in the cluster's
    group vars, where the fixture set it), D where the rolling test above left it (D_ENV)."""
    base = Path(lab.inventory)
    out = base.parent / f"{base.name}-{name}"
    shutil.copytree(base, out)
    (out / "group_vars" / "all" / "change.yml").write_text(D_ENV)
    cluster_vars = out / "group_vars" / "cluster_lab57.yml"
    values = yaml.safe_load(cluster_vars.read_text())
    values.update({"vllm_pd_proxy_front": "haproxy", "proxy_extra_args": ["--waiting-retry-interval", wait_interval]})
    cluster_vars.write_text(yaml.safe_dump(values))
    return Lab(out)


def process_pids(lab):
    return {u: main_pid(lab, P, u) for u in proxy_front.process_units(proxy_front.DEFAULT_PROCESSES)}


def test_the_proxy_tier_runs_0_18s_proxy_and_recycles_it_under_a_closed_loop(rel18):
    """Issue 37 with 0.18.0's example proxy: the single proxy hands port 8000 to HAProxy, the smoke request goes
    through it; then a change of the proxy's arguments under 3 closed-loop clients recycles each process (drained in
    HAProxy, restarted, ready once its /healthcheck counts 1 P and 2 D) with no failed request."""
    lab = rel18
    tier = tier_inventory(lab, "tier", "0.2")
    try:
        r = tier.playbook("playbooks/deploy_pd.yml", check=False)
    finally:
        tier.close()
    text = " ".join(r.stdout.split())
    assert r.returncode == 0 and "the proxy tier took proxy port 8000 over from the single proxy" in text, r.stdout[-5000:]
    assert "KV moved P -> D for" in r.stdout
    assert lab.unit(P, proxy_front.FRONT_UNIT) == ("enabled", "active")
    before = process_pids(lab)
    for unit in before:
        assert PROXY in lab.run(P, f"tr '\\0' ' ' < /proc/{before[unit]}/cmdline").stdout
    assert healthcheck(lab) == {"status": "ok", "prefill_instances": 1, "decode_instances": 2}  # through HAProxy

    changed = tier_inventory(lab, "tier-args", "0.5")
    spec = loadgen.LoadSpec(url(lab), rate=None, concurrency=3, count=10 ** 6, max_tokens=8, timeout=60, guard=lab.guard)
    bg = loadgen.Background(spec).start()
    try:
        r = changed.playbook("playbooks/deploy_pd.yml", check=False)
    finally:
        result = bg.stop_and_wait()
        changed.close()
    print(f"\n0.18.0 proxy arguments changed under 3 closed-loop clients: rc {r.returncode}; completed "
          f"{result['completed']} failed {result['failed']} in {result['duration_s']:.1f} s; errors {result['errors'][:3]}")
    assert r.returncode == 0, Lab.failures(r)
    after = process_pids(lab)
    assert all(after[u] not in ("0", before[u]) for u in before), (before, after)
    for unit in after:
        assert "--waiting-retry-interval 0.5" in lab.run(P, f"tr '\\0' ' ' < /proc/{after[unit]}/cmdline").stdout
    assert result["failed"] == 0, result["errors"]
    assert result["completed"] >= 20, result
