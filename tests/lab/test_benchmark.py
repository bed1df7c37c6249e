"""The benchmark gate end to end (issue 22) on clusters lab30 and lab31 (1P1D each, hosts pd-p30, pd-d30,
pd-p31, pd-d31 of lab/gen-inventory), so the other lab tests' clusters are left alone; it does not use the
``lab`` fixture (that brings up inventory/lab). Its containers are removed at the end.

playbooks/benchmark.yml prints the table, writes the JSON per cluster and the page; the page opened in
headless chromium shows the JSON's numbers; the slow-KV fixture on one D fails that cluster's gate naming
the slow pair and its p99 while the other cluster passes; a request that fails (a D NPU link down: the
transfer is refused and D answers 500) fails the gate.
"""
import json
import re
from html import unescape
from pathlib import Path

import pytest

import browser
from conftest import own_lab

pytestmark = pytest.mark.lab

TP = 8  # both sides of the lab clusters (inventory/lab/group_vars/all/pd.yml): one transfer line per rank
# A healthy pair's p99 reached 460 ms while other lab tests loaded the 2 cores; the slow one is far above the bound.
KV_BOUND_MS, KV_DELAY_MS = 900, 1500
CHART_BLUE, PASS_GREEN, FAIL_RED = (21, 101, 192), (46, 125, 50), (198, 40, 40)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    with own_lab(tmp_path_factory, 30, clusters=2) as lab:
        lab.playbook("playbooks/deploy_pd.yml")
        yield lab


def bench(lab, out, *extra, check=True):
    r = lab.playbook("playbooks/benchmark.yml", "-e", f"vllm_pd_bench_dir={out}", "-e", "vllm_pd_bench_requests=24",
                     "-e", "vllm_pd_bench_warmup=3", *extra, check=check)
    return r


def runs(out, cluster):
    return sorted(p for p in (Path(out) / cluster).glob("*.json") if p.name != "baseline.json")


def record(out, cluster):
    return json.loads(runs(out, cluster)[-1].read_text())


def pair(rec, name):
    return next(p for p in rec["kv_transfer"] if p["pair"] == name)


def shown(value):
    """The page writes the JSON's numbers so (docs/design.md "Benchmark gate")."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    return "%d" % value if isinstance(value, int) else "%.2f" % value


def value_at(rec, key):
    if key.startswith("kv_transfer."):
        rest = key[len("kv_transfer."):]
        p = next(p for p in rec["kv_transfer"] if rest.startswith(p["pair"] + "."))
        value, path = p, rest[len(p["pair"]) + 1:]
    else:
        value, path = rec, key
    for part in path.split("."):
        value = value[part]
    return value


def test_benchmark_prints_the_table_saves_json_baseline_and_the_page(two, tmp_path):
    lab, out = two, tmp_path / "results"
    r = bench(lab, out, "-e", "vllm_pd_bench_save_baseline=true")
    for cluster, p, d in (("lab30", "pd-p30", "pd-d30"), ("lab31", "pd-p31", "pd-d31")):
        assert f"cluster {cluster}" in r.stdout and "out tok/s" in r.stdout and f"KV p99 ms {p} -> {d}" in r.stdout
        rec = record(out, cluster)
        assert rec["passed"] and rec["findings"] == [] and rec["tool"] == "loadgen"
        # the stand-in's vllm has no bench subcommand, as a vLLM without it answers
        assert "invalid choice: 'bench'" in rec["notes"][0]
        res = rec["result"]
        assert res["completed"] == 24 and res["failed"] == 0 and res["output_throughput"] > 0
        for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
            s = res[metric]
            assert s["min"] <= s["p50"] <= s["p90"] <= s["p99"] <= s["max"], (metric, s)
        # prefill 2 ms per token x 128 words: TTFT is prefill plus the pull. TPOT is per decode step (10 ms at
        # least): the mean time between a request's tokens, so TTFT is out of it. A busy machine stretches the
        # step, and the gaps between tokens with it, so TPOT is held to them, not to a wall-clock ceiling.
        tpot, itl = res["tpot_ms"], res["itl_ms"]
        assert res["ttft_ms"]["p50"] > 256 and tpot["min"] >= 10, (res["ttft_ms"], tpot)
        assert abs(tpot["mean"] - itl["mean"]) <= 0.25 * itl["mean"], (tpot, itl)
        kv = pair(rec, f"{p} -> {d}")
        assert kv["prefill_address"] == lab.hosts[p]["data_ip"] and kv["decode_address"] == lab.hosts[d]["data_ip"]
        # every transfer of the measured run, none of the warm-up's: one line per rank and request
        assert kv["requests"] == 24 and kv["ms"]["n"] == 24 * TP
        assert json.loads((out / cluster / "baseline.json").read_text())["run_id"] == rec["run_id"]
    page = out / (record(out, "lab30")["run_id"] + ".html")
    assert f"page: {page}" in r.stdout

    # a second run is compared with the first (table) and gated against the baseline (same load)
    r = bench(lab, out, "-e", "vllm_pd_baseline_tolerance=0.5")
    first, second = runs(out, "lab30")
    rec = record(out, "lab30")
    assert rec["gate"]["baseline"]["run_id"] == first.stem and rec["passed"]
    assert re.search(rf"cluster lab30\s+{first.stem}\s+{second.stem}\s+change", r.stdout), r.stdout[-3000:]


def test_page_in_headless_chromium_shows_the_json_numbers(two, tmp_path):
    # the check itself must see a console error when there is one
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><p>x</p><script>undefinedFunction()</script></body></html>')
    assert any("undefinedFunction" in m for m in browser.open_page(bad).console)

    out = tmp_path / "results"
    bench(two, out, "-e", f"vllm_pd_slo_kv_transfer_ms={KV_BOUND_MS}", check=False)
    records = {c: record(out, c) for c in ("lab30", "lab31")}
    html = out / (records["lab30"]["run_id"] + ".html")
    text = html.read_text()
    assert not re.search(r"<(script|link|img|iframe)\b", text) and "@import" not in text
    page = browser.open_page(html)
    assert page.console == [], page.console
    numbers = [(tag, unescape(c), unescape(k), unescape(v)) for tag, c, k, v in re.findall(
        r'<(\w+) data-cluster="([^"]+)" data-key="([^"]+)">([^<]*)</\1>', page.dom)]
    seen = {(c, k) for _t, c, k, _v in numbers}
    for cluster, rec in records.items():
        keys = {k for c, k in seen if c == cluster}
        assert {"passed", "result.output_throughput", "result.ttft_ms.p99", "result.tpot_ms.p99",
                f"kv_transfer.{rec['kv_transfer'][0]['pair']}.ms.p99"} <= keys, keys
    for _tag, cluster, key, text_value in numbers:
        assert text_value == shown(value_at(records[cluster], key)), (cluster, key)
    # drawn, not only parsed: the latency charts' blue and the passing pairs' green are on the screen
    assert page.pixels[CHART_BLUE] > 200 and page.pixels[PASS_GREEN] + page.pixels[FAIL_RED] > 200, \
        page.pixels.most_common(10)


def test_slow_kv_on_one_decode_fails_its_cluster_naming_the_pair_and_p99(two, tmp_path):
    lab, out = two, tmp_path / "results"
    lab.fixtures("pd-d31", ["kv_slow"], lab_kv_delay_ms=KV_DELAY_MS)
    try:
        r = bench(lab, out, "-e", f"vllm_pd_slo_kv_transfer_ms={KV_BOUND_MS}", check=False)
    finally:
        lab.fixtures("pd-d31", state="absent")
    assert r.returncode != 0
    slow, ok = record(out, "lab31"), record(out, "lab30")
    p99 = pair(slow, "pd-p31 -> pd-d31")["ms"]["p99"]
    assert p99 >= KV_DELAY_MS
    (f,) = slow["findings"]
    assert f["check"] == "BenchKvTransferSlow" and f["pair"] == "pd-p31 -> pd-d31" and f["value"] == p99
    message = (f"[BenchKvTransferSlow] cluster lab31: KV transfer pd-p31 -> pd-d31 (192.168.130.31 -> 192.168.130.32): "
               f"p99 {p99:.2f} ms is above vllm_pd_slo_kv_transfer_ms {KV_BOUND_MS} ms")
    assert message in r.stdout
    assert re.search(r"fatal: \[pd-p31\]", r.stdout) and not re.search(r"fatal: \[pd-p30\]", r.stdout)
    assert ok["passed"] and pair(ok, "pd-p30 -> pd-d30")["ms"]["p99"] < KV_BOUND_MS
    page = browser.open_page(out / (slow["run_id"] + ".html"))
    assert page.console == [] and "BenchKvTransferSlow" in page.dom and page.pixels[FAIL_RED] > 200


def test_a_failed_request_fails_the_gate(two, tmp_path):
    lab, out = two, tmp_path / "results"
    # D's rank 0 NPU link down: D refuses the transfer (HcclCommPrepare fail), answers 500, the proxy's stream breaks
    lab.fixtures("pd-d30", ["npu_link_down"], lab_npu_index=0)
    try:
        r = bench(lab, out, "--limit", "cluster_lab30", "-e", "vllm_pd_bench_save_baseline=true", check=False)
    finally:
        lab.fixtures("pd-d30", state="absent")
    assert r.returncode != 0
    rec = record(out, "lab30")
    assert rec["result"]["failed"] == 24 and not rec["passed"]
    assert [f["check"] for f in rec["findings"]] == ["BenchRequestsFailed"]
    assert "[BenchRequestsFailed] cluster lab30: 24 of 24 requests failed through the proxy on pd-p30" in r.stdout
    assert not (out / "lab30" / "baseline.json").exists()  # a run with failed requests is no baseline
    # and the cluster passes again once the fault is gone
    bench(lab, out, "--limit", "cluster_lab30")
    assert record(out, "lab30")["passed"]
