import sys
import time
import urllib.request

# On a host the role puts these module_utils in front of this script (filter pd_host_script).
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.prom_text import totals
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime

# probe_drained.py KIND METRICS_URL TIMEOUT [D_METRICS_URL ...]: wait, within this one call, until an
# instance already out of the proxy has nothing in flight; print one line: drained, gone: WHY (the
# engine does not answer: nothing can be in flight there) or busy: WHAT (at the deadline).
#  decode:  its vllm:num_requests_running + vllm:num_requests_waiting is 0.
#  prefill: the same on P; then the KV it may still hold for a D (day2-ops §2c: a finished P request
#           stays in the delayed-free set until D pulls; no gauge shows it): the proxy sent each such
#           request to a D right after P answered, and D pulls while the request waits, so once P is
#           idle, each D of the cluster must read num_requests_waiting 0 in a sample taken GRACE s
#           later or after.
# /metrics needs no API key: vLLM guards only /v1, /v2 and /inference (serve/utils/server_utils.py).
# (running, waiting): the release table's busy_gauges (the same in every release it knows)
GAUGES = runtime(None)["busy_gauges"]
WAITING = GAUGES[1]
GRACE = 1.0
POLL = 0.5


def gauges(text):
    """{name: sum over label sets} of the GAUGES in a Prometheus text exposition (ValueError: a garbled gauge)."""
    return totals(text, GAUGES)


def read(url):
    with urllib.request.urlopen(url, timeout=3) as r:
        return gauges(r.read().decode("utf-8", "replace"))


def wait(url, done, deadline, what):
    """Poll URL until done(gauges); 'gone: ...' when it does not answer, None when done, 'busy' at the deadline."""
    while True:
        try:
            g = read(url)
        except Exception as exc:  # pylint: disable=broad-except
            return "gone: %s (%s)" % (url, exc)
        if done(g):
            return None
        if time.monotonic() >= deadline:
            return "busy: %s %s" % (what, ", ".join("%s=%g" % (k, v) for k, v in sorted(g.items())))
        time.sleep(POLL)


def main(argv):
    kind, url, deadline = argv[1], argv[2], time.monotonic() + float(argv[3])
    idle = wait(url, lambda g: sum(g.values()) == 0, deadline, url)
    if idle and idle.startswith("busy"):
        return idle
    if kind == "prefill":
        time.sleep(GRACE)
        for d_url in argv[4:]:
            pulled = wait(d_url, lambda g: g[WAITING] == 0, deadline,
                          "%s still waits for KV (P %s)" % (d_url, url))
            if pulled and pulled.startswith("busy"):
                return pulled
    return idle or "drained"


if __name__ == "__main__":
    print(main(sys.argv))
