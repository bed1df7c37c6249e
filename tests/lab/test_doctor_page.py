"""The doctor's page end to end (issue 22 item 2) on cluster lab45, 1P2D (hosts pd-p45, pd-d45-1, pd-d45-2 of
lab/gen-inventory), its own: load through the proxy with the load generator, then playbooks/doctor.yml writes
RUN_ID.html and RUN_ID.json in vllm_pd_doctor_report_dir; the page opened in headless chromium renders, logs
nothing on the console, draws its charts and shows the JSON's numbers, which equal what the hosts say (the
engines' /metrics, D's journal). A stopped D is on the page as a finding, as a stopped instance and as an
engine whose /metrics cannot be read. Its containers are removed at the end.
"""
import json
import re
from html import unescape

import pytest

import browser
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen
from conftest import own_lab

pytestmark = pytest.mark.lab

P, D1, D2 = "pd-p45", "pd-d45-1", "pd-d45-2"
CLUSTER = "lab45"
REQUESTS = 12
TP = 8  # inventory/lab: one KV transfer line per rank and request
KV_LINE = "KV cache transfer for request"
# the latency charts' purple (#6a1b9a at 0.5 over white) and the KV chart's green (report_svg)
LATENCY_BARS, KV_GREEN = (180, 141, 204), (46, 125, 50)


@pytest.fixture(scope="module")
def lab45(tmp_path_factory):
    with own_lab(tmp_path_factory, 45, decode=2) as lab:
        lab.playbook("playbooks/deploy_pd.yml")
        yield lab


def doctor(lab, out, *extra, check=True):
    """doctor.yml into OUT; returns (result, page path, JSON record)."""
    r = lab.playbook("playbooks/doctor.yml", "-e", f"vllm_pd_doctor_report_dir={out}", *extra, check=check)
    (page,) = sorted(out.glob("*.html"))
    js = page.with_suffix(".json")
    assert f"report: {page}" in r.stdout and f"json: {js}" in r.stdout
    return r, page, json.loads(js.read_text())


def shown(value):
    """How the page writes a JSON value (docs/design.md "Doctor page")."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "%d" % value
    if isinstance(value, float):
        return "%.2f" % value
    return str(value)


def value_at(data, cluster, key):
    """data-key: findings.N.FIELD from the JSON's root, everything else from the cluster's record."""
    value = data if key.startswith("findings.") else next(c for c in data["clusters"] if c["name"] == cluster)
    for part in key.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def page_values(dom):
    return [(unescape(c), unescape(k), unescape(v)) for _t, c, k, v in re.findall(
        r'<(\w+) data-cluster="([^"]+)" data-key="([^"]+)"[^>]*>([^<]*)</\1>', dom)]


def open_checked(page_path, data):
    """Open the page in chromium: self-contained, no console message, every number equal to the JSON's."""
    text = page_path.read_text()
    assert not re.search(r"<(script|link|img|iframe|object|embed)\b", text) and "@import" not in text
    assert not re.search(r"(src|href)=|url\((?!#)", text), "the page fetches nothing"
    page = browser.open_page(page_path)
    assert page.console == [], page.console
    values = page_values(page.dom)
    assert values, page.dom[:2000]
    for cluster, key, text_value in values:
        assert text_value == shown(value_at(data, cluster, key)), (cluster, key, text_value)
    return page, {k: v for _c, k, v in values}


def scrape_count(lab, host, port, name):
    r = lab.ssh(host, f"python3 -c 'import urllib.request; print(urllib.request.urlopen("
                      f"\"http://{lab.hosts[host]['data_ip']}:{port}/metrics\", timeout=5).read().decode())'")
    return sum(float(m) for m in re.findall(rf"^{re.escape(name)}_count\{{[^}}]*\}} (\S+)$", r.stdout, re.M))


def test_page_shows_ports_members_kv_per_pair_and_latency_equal_to_the_hosts(lab45, tmp_path):
    lab = lab45
    # 4 requests in flight at once: the 0.23 example proxy gives each to the decode with the fewest active tokens,
    # ties to the first listed, so requests sent one after another (4/s on a quiet machine) all reach D1
    result = loadgen.run(loadgen.LoadSpec(f"http://{lab.hosts[P]['data_ip']}:8000", max_tokens=8, rate=None,
                                          concurrency=4, count=REQUESTS, guard=lab.guard))
    assert (result["completed"], result["failed"]) == (REQUESTS, 0), result["errors"]
    r, page_path, data = doctor(lab, tmp_path / "reports")
    (cl,) = data["clusters"]
    assert cl["name"] == CLUSTER and cl["root_cause"] is None, data["findings"]

    # KV per P->D pair: both pairs, each as many requests as D's own journal names (and the load reached both)
    pairs = {p["pair"]: p for p in cl["kv_transfer"]}
    assert set(pairs) == {f"{P} -> {D1}", f"{P} -> {D2}"}, pairs
    journal = {}
    for d in (D1, D2):
        journal[d] = lab.ssh(d, f"journalctl --no-pager -o cat -u vllm-pd-decode.service --since=-15min "
                                f"--grep='{KV_LINE}'").stdout
        ids = set(re.findall(rf"{KV_LINE} (\S+) took", journal[d]))
        p = pairs[f"{P} -> {d}"]
        assert p["requests"] == len(ids) and p["ms"]["n"] == len(ids) * TP and p["requests"] > 0, (d, p["requests"])
        assert p["prefill_address"] == lab.hosts[P]["data_ip"] and p["decode_address"] == lab.hosts[d]["data_ip"]
        assert p["ms"]["min"] <= p["ms"]["p50"] <= p["ms"]["p99"] <= p["ms"]["max"]
    assert sum(p["requests"] for p in pairs.values()) >= REQUESTS
    assert cl["kv_silent"] == []
    # the cap keeps the latest lines of each D
    _r, _page, capped = doctor(lab, tmp_path / "capped", "-e", f"vllm_pd_doctor_kv_lines={TP}")
    for p in capped["clusters"][0]["kv_transfer"]:
        last = re.findall(rf"{KV_LINE} (\S+) took (\S+) ms", journal[p["decode"]])[-TP:]
        assert (p["requests"], p["samples"]) == (len({i for i, _ms in last}), [float(ms) for _i, ms in last]), p

    # latency per instance: the counts are the engines' own /metrics counts (read independently here)
    lat = {(m["host"], m["kind"]): m for m in cl["latency"]}
    assert set(lat) == {(P, "prefill"), (D1, "decode"), (D2, "decode")}
    for (host, kind), m in lat.items():
        port = 8100 if kind == "prefill" else 8200
        assert m["error"] is None
        assert m["ttft_ms"]["metric"] == "vllm:time_to_first_token_seconds"
        assert m["itl_ms"]["metric"] == "vllm:inter_token_latency_seconds"
        for key, name in (("ttft_ms", "vllm:time_to_first_token_seconds"),
                          ("e2el_ms", "vllm:e2e_request_latency_seconds")):
            assert m[key]["n"] == scrape_count(lab, host, port, name), (host, key)
            assert m[key]["p50"] <= m[key]["p90"] <= m[key]["p99"]
            assert sum(b[2] for b in m[key]["bins"]) == m[key]["n"]
    assert lat[(P, "prefill")]["ttft_ms"]["n"] >= REQUESTS
    assert lat[(D1, "decode")]["e2el_ms"]["n"] + lat[(D2, "decode")]["e2el_ms"]["n"] >= REQUESTS

    # ports and proxy members
    (pi,) = [i for i in cl["instances"] if i["kind"] == "prefill"]
    assert [p["state"] for p in pi["ports"]] == ["listening"] * TP and pi["group"] == "28002-28009"
    (pm,) = cl["proxy_members"]
    assert pm["host"] == P and pm["error"] is None
    assert sorted(pm["live"]["decode"]) == sorted(pm["desired"]["decode"]) == sorted(
        f"{lab.hosts[d]['data_ip']}:8200" for d in (D1, D2))
    assert pm["missing"] == {"prefill": [], "decode": []} and pm["extra"] == {"prefill": [], "decode": []}

    page, shown_keys = open_checked(page_path, data)
    i1 = cl["kv_transfer"].index(pairs[f"{P} -> {D1}"])
    must = {f"kv_transfer.{i}.ms.{k}" for i in range(2) for k in ("p50", "p99", "n")} | {
        f"latency.{i}.{m}.{k}" for i in range(3) for m in ("ttft_ms", "itl_ms", "e2el_ms") for k in ("n", "p50", "p99")} | {
        f"instances.{cl['instances'].index(pi)}.ports.{j}.state" for j in range(TP)} | {
        "proxy_members.0.live.decode.0", "proxy_members.0.live.decode.1"}
    assert must <= set(shown_keys), must - set(shown_keys)
    assert shown_keys[f"kv_transfer.{i1}.pair"] == f"{P} -> {D1}"
    # drawn: the latency histograms' bars and the KV pairs' green are on the screen
    assert page.pixels[LATENCY_BARS] > 500 and page.pixels[KV_GREEN] > 500, page.pixels.most_common(12)


def test_a_stopped_decode_is_on_the_page(lab45, tmp_path):
    lab = lab45
    lab.ssh(D2, "systemctl stop vllm-pd-decode.service")
    try:
        r, page_path, data = doctor(lab, tmp_path / "reports", check=False)
    finally:
        lab.playbook("playbooks/deploy_pd.yml")
    assert r.returncode != 0
    (cl,) = data["clusters"]
    down = [(i, f) for i, f in enumerate(data["findings"]) if f["check"] == "EngineDown"]
    assert [f["host"] for _i, f in down] == [D2], data["findings"]
    (d2,) = [m for m in cl["latency"] if m["host"] == D2]
    assert d2["error"] and d2["error"].startswith("GET /metrics") and d2["ttft_ms"] is None
    (inst,) = [i for i in cl["instances"] if i["host"] == D2]
    assert inst["state"] != "active" and not inst["active"]

    _page, shown_keys = open_checked(page_path, data)
    i = down[0][0]
    assert shown_keys[f"findings.{i}.check"] == "EngineDown" and shown_keys[f"findings.{i}.host"] == D2
    assert "systemctl start vllm-pd-decode.service" in shown_keys[f"findings.{i}.fix"]
    assert shown_keys[f"latency.{cl['latency'].index(d2)}.error"] == d2["error"]
    assert shown_keys[f"instances.{cl['instances'].index(inst)}.state"] == inst["state"]
