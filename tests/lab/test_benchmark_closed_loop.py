"""The benchmark's closed loop (issue 32): vllm_pd_bench_rate: null with vllm_pd_bench_concurrency: 4, as the
README documents it, passes the benchmark role's argument spec and sends the load with 4 requests in flight
and no rate; the saved JSON says so. With one request in flight the example proxy gives every request to the
first decode host (fewest active tokens, ties to the first listed): the other D is noted as idle, not failed
for logging no KV transfer. Cluster lab52 of lab/gen-inventory (1P2D), removed at the end.
"""
import json
from pathlib import Path

import pytest

from conftest import own_lab

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    with own_lab(tmp_path_factory, 52, decode=2) as lab:
        lab.playbook("playbooks/deploy_pd.yml")
        yield lab


def test_closed_loop_with_concurrency_4(one, tmp_path):
    out = tmp_path / "results"
    # JSON: a real null, as in group_vars (vllm_pd_bench_rate: null)
    r = one.playbook("playbooks/benchmark.yml", "-e", json.dumps({
        "vllm_pd_bench_dir": str(out), "vllm_pd_bench_requests": 24, "vllm_pd_bench_warmup": 3,
        "vllm_pd_bench_rate": None, "vllm_pd_bench_concurrency": 4}))
    assert "cluster lab52" in r.stdout and "is of type NoneType" not in r.stdout
    (run,) = [p for p in (Path(out) / "lab52").glob("*.json") if p.name != "baseline.json"]
    rec = json.loads(run.read_text())
    assert rec["passed"] and rec["findings"] == [], rec["findings"]
    assert rec["load"]["rate"] is None and rec["load"]["concurrency"] == 4 and rec["load"]["count"] == 24
    assert rec["result"]["completed"] == 24 and rec["result"]["failed"] == 0
    # the page names the load as the closed loop
    page = (out / (rec["run_id"] + ".html")).read_text()
    assert "concurrency 4" in page and "rate None" not in page


def test_a_decode_the_proxy_never_picked_is_noted_idle_not_failed(one, tmp_path):
    out = tmp_path / "results"
    r = one.playbook("playbooks/benchmark.yml", "-e", json.dumps({
        "vllm_pd_bench_dir": str(out), "vllm_pd_bench_requests": 8, "vllm_pd_bench_warmup": 1,
        "vllm_pd_bench_rate": None, "vllm_pd_bench_concurrency": 1, "vllm_pd_slo_kv_transfer_ms": 60000}))
    assert r.returncode == 0, r.stdout[-5000:]
    (run,) = [p for p in (Path(out) / "lab52").glob("*.json") if p.name != "baseline.json"]
    rec = json.loads(run.read_text())
    assert rec["passed"] and rec["findings"] == [] and rec["kv_unseen"] == [], rec
    measured = {p["decode"] for p in rec["kv_transfer"]}
    idle = [n for n in rec["notes"] if "finished no request during the run" in n]
    assert measured, rec
    # each D either pulled KV or is named idle (requests one after another mostly reach pd-d52-1 only)
    for host in ("pd-d52-1", "pd-d52-2"):
        assert host in measured or any(n.startswith(host) or f", {host}" in n for n in idle), (host, rec)
