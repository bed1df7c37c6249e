"""The stand-in's /metrics text: vLLM's names and labels, cumulative histogram buckets, KV cache usage
from the block pool (blocks held for D count as used)."""
from vllm_standin import kvcache, metrics


def parse(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def test_counts_gauges_and_cumulative_buckets():
    pool = kvcache.BlockPool(8)
    m = metrics.Metrics("lab-model", pool)
    held = pool.allocate(2)
    m.change(running=1, waiting=2)
    for seconds in (0.003, 0.05, 3000.0):
        m.observe("ttft", seconds)
    m.finished("length", 10, 4, 0.7)
    v = parse(m.render())
    lab = 'engine="0",model_name="lab-model"'
    assert v[f"vllm:num_requests_running{{{lab}}}"] == 1 and v[f"vllm:num_requests_waiting{{{lab}}}"] == 2
    assert v[f"vllm:kv_cache_usage_perc{{{lab}}}"] == 0.25
    assert v[f'vllm:request_success_total{{{lab},finished_reason="length"}}'] == 1
    assert v[f"vllm:prompt_tokens_total{{{lab}}}"] == 10 and v[f"vllm:generation_tokens_total{{{lab}}}"] == 4
    assert v[f'vllm:time_to_first_token_seconds_bucket{{{lab},le="0.001"}}'] == 0
    assert v[f'vllm:time_to_first_token_seconds_bucket{{{lab},le="0.005"}}'] == 1
    assert v[f'vllm:time_to_first_token_seconds_bucket{{{lab},le="0.06"}}'] == 2
    assert v[f'vllm:time_to_first_token_seconds_bucket{{{lab},le="2560.0"}}'] == 2   # 3000 s is only in +Inf
    assert v[f'vllm:time_to_first_token_seconds_bucket{{{lab},le="+Inf"}}'] == 3
    assert v[f"vllm:time_to_first_token_seconds_count{{{lab}}}"] == 3
    assert v[f'vllm:e2e_request_latency_seconds_bucket{{{lab},le="0.8"}}'] == 1
    pool.free(held)
    m.change(running=-1, waiting=-2)
    v = parse(m.render())
    assert v[f"vllm:kv_cache_usage_perc{{{lab}}}"] == 0 and v[f"vllm:num_requests_running{{{lab}}}"] == 0


def test_a_bound_equal_to_the_value_holds_it():
    h = metrics.Histogram((0.1, 0.5))
    h.observe(0.1)
    assert h.counts == [1, 0]
