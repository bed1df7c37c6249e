"""docs/grafana/vllm-pd-dashboard.json queries only metrics that exist: vLLM's names as the supported
releases export them (the stand-in serves each, so every vLLM panel has data in the lab), Ascend
npu-exporter's and Prometheus' own `up`; none of the names vLLM renamed or removed."""
import json
import re
from pathlib import Path

from vllm_standin import kvcache, metrics

DASHBOARD = Path(__file__).resolve().parents[3] / "docs" / "grafana" / "vllm-pd-dashboard.json"
# Ascend npu-exporter (Ascend/ascend-npu-exporter collector/npu_collector.go; observability-bench.md §B7)
NPU_EXPORTER = {"npu_chip_info_health_status", "npu_chip_info_hbm_used_memory", "npu_chip_info_hbm_total_memory"}
# Prometheus' own metric per scrape target
PROMETHEUS = {"up"}
# renamed or removed before the supported releases (vLLM 0.18-0.23; observability-bench.md §B4):
# gpu_cache_usage_perc -> kv_cache_usage_perc (0.10), time_per_output_token_seconds -> inter_token_latency_seconds
GONE = {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds", "vllm:gpu_prefix_cache_hit_rate",
        "vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc"}
FUNCTIONS = {"sum", "max", "min", "avg", "rate", "histogram_quantile", "label_values", "by", "without"}


def exported():
    """Series names of the stand-in's /metrics (a histogram is NAME_bucket/_sum/_count)."""
    m = metrics.Metrics("lab-model", kvcache.BlockPool(8))
    m.finished("stop", 1, 1, 0.1)
    return {line.split("{")[0].split(" ")[0] for line in m.render().splitlines() if line and not line.startswith("#")}


def metric_names(expr):
    """The metric names of a PromQL expression: selectors, grouping labels, ranges and strings removed."""
    expr = re.sub(r'"[^"]*"', "", expr)
    expr = re.sub(r"label_values\(([^,]+),[^)]*\)", r"\1", expr)  # label_values(METRIC, LABEL)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(by|without)\s*\([^)]*\)", "", expr)
    names = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr)) - FUNCTIONS
    return {n for n in names if not n.startswith("$")}


def queries():
    d = json.loads(DASHBOARD.read_text())
    out = [t["expr"] for p in d["panels"] for t in p["targets"]]
    out += [v["query"]["query"] for v in d["templating"]["list"] if v["type"] == "query"]
    return out


def test_metric_names_are_parsed():
    assert metric_names('histogram_quantile(0.99, sum by (le, role) (rate(vllm:x_bucket{a=~"$c"}[5m])))') == {"vllm:x_bucket"}
    assert metric_names("max by (instance, id) (a / b)") == {"a", "b"}
    assert metric_names("label_values(vllm:y, cluster)") == {"vllm:y"}


def test_every_queried_metric_exists():
    have = exported()
    used = set().union(*(metric_names(q) for q in queries()))
    vllm = {n for n in used if n.startswith("vllm:")}
    assert vllm and vllm <= have, sorted(vllm - have)
    assert not used & GONE
    assert used - vllm <= NPU_EXPORTER | PROMETHEUS, sorted(used - vllm - NPU_EXPORTER - PROMETHEUS)
    # every vLLM metric the stand-in serves has a panel
    bases = {re.sub(r"_(bucket|sum|count)$", "", n) for n in have}
    assert {re.sub(r"_bucket$", "", n) for n in vllm} == bases


def test_panels_filter_by_the_file_sd_labels():
    d = json.loads(DASHBOARD.read_text())
    for p in d["panels"]:
        for t in p["targets"]:
            if "vllm:" in t["expr"] or t["expr"].startswith("up"):
                assert 'cluster=~"$cluster"' in t["expr"], (p["title"], t["expr"])
    assert len({p["id"] for p in d["panels"]}) == len(d["panels"])
