"""GET /metrics in Prometheus text format with vLLM's metric names (docs.vllm.ai usage/metrics;
observability-bench.md §B4), only for what the stand-in really counts: requests running and waiting
(D's requests waiting for remote KV are waiting, as in vLLM's WAITING_FOR_REMOTE_KVS), KV cache
usage of its block pool (P's blocks held for D count as used), finished requests, tokens, and the
engine-side TTFT, inter-token and end-to-end latencies. Labels model_name and engine as vLLM's."""
import bisect
import threading

# vLLM v1's bucket bounds (vllm/v1/metrics/loggers.py), in seconds
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
               480.0, 960.0, 1920.0, 7680.0)


class Histogram:
    def __init__(self, buckets):
        self.buckets, self.counts, self.total, self.n = buckets, [0] * len(buckets), 0.0, 0

    def observe(self, value):
        i = bisect.bisect_left(self.buckets, value)
        if i < len(self.counts):
            self.counts[i] += 1
        self.total += value
        self.n += 1

    def lines(self, name, labels):
        out, cumulative = [], 0
        for bound, count in zip(self.buckets, self.counts):
            cumulative += count
            out.append(f'{name}_bucket{{{labels},le="{bound}"}} {cumulative}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.n}')
        out.append(f"{name}_count{{{labels}}} {self.n}")
        out.append(f"{name}_sum{{{labels}}} {self.total}")
        return out


class Metrics:
    def __init__(self, model_name, pool):
        self.labels = f'engine="0",model_name="{model_name}"'
        self.pool = pool
        self.running = self.waiting = 0
        self.success = {}
        self.prompt_tokens = self.generation_tokens = 0
        self.ttft, self.itl, self.e2e = Histogram(TTFT_BUCKETS), Histogram(ITL_BUCKETS), Histogram(E2E_BUCKETS)
        self._lock = threading.Lock()

    def change(self, running=0, waiting=0):
        with self._lock:
            self.running += running
            self.waiting += waiting

    def observe(self, name, seconds):
        with self._lock:
            getattr(self, name).observe(seconds)

    def finished(self, reason, prompt_tokens, generation_tokens, e2e_seconds):
        with self._lock:
            self.success[reason] = self.success.get(reason, 0) + 1
            self.prompt_tokens += prompt_tokens
            self.generation_tokens += generation_tokens
            self.e2e.observe(e2e_seconds)

    def render(self):
        lab = self.labels
        usage = 1.0 - self.pool.num_free / self.pool.num_blocks
        with self._lock:
            out = [
                "# HELP vllm:num_requests_running Number of requests in model execution batches.",
                "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{lab}}} {self.running}",
                "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
                "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{lab}}} {self.waiting}",
                "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
                "# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc{{{lab}}} {usage}",
                "# HELP vllm:request_success_total Count of successfully processed requests.",
                "# TYPE vllm:request_success_total counter"]
            out += [f'vllm:request_success_total{{{lab},finished_reason="{r}"}} {n}'
                    for r, n in sorted(self.success.items())]
            out += ["# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
                    "# TYPE vllm:prompt_tokens_total counter", f"vllm:prompt_tokens_total{{{lab}}} {self.prompt_tokens}",
                    "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
                    "# TYPE vllm:generation_tokens_total counter",
                    f"vllm:generation_tokens_total{{{lab}}} {self.generation_tokens}"]
            for name, hist, text in (("vllm:time_to_first_token_seconds", self.ttft, "Histogram of time to first token in seconds."),
                                     ("vllm:inter_token_latency_seconds", self.itl, "Histogram of inter-token latency in seconds."),
                                     ("vllm:e2e_request_latency_seconds", self.e2e, "Histogram of e2e request latency in seconds.")):
                out += [f"# HELP {name} {text}", f"# TYPE {name} histogram"] + hist.lines(name, lab)
        return "\n".join(out) + "\n"
