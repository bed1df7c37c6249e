"""Benchmark: the latency the proxy tier's front (HAProxy, vllm_pd_proxy_front: haproxy) adds per request (issue 37).

Cluster lab<F> of lab/gen-inventory (default F=58, 1P1D, the real example proxy of the lab's release) is brought up
and deployed with the front. Then, on the proxy host itself (so that the network path is the same for both and a
proxy process on 127.0.0.1 is reachable), one request at a time, alternating:
  through the front   http://VLLM_HOST_IP:PROXY_PORT  (HAProxy, leastconn over the proxy processes)
  proxy alone         http://127.0.0.1:PORT_OF_PROCESS_1  (the same example proxy, no front)
for two kinds of request: a completion (max_tokens 4: P, the KV transfer and D, as clients use it) and the proxy's
health route (no engine: what is left is the front's own cost). Prints p50/p99 of each path in ms and what the front
adds: the difference of the p50s and p99s and the median of the paired differences (each front request against the
direct one just after it). Lab containers only; every address is route-guarded.

Usage: .venv/bin/python tests/perf/bench_front.py [--first 58] [--requests 200] [--keep]
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lab"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rollout as br  # noqa: E402  (playbook runner)
from conftest import Lab, lab_inventory  # noqa: E402  (the lab tests' inventory and host helpers)

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front, releases  # noqa: E402

# run on the proxy host: ROUNDS x (front, direct) for a completion and for the health route; JSON of the times in ms
PROBE = r'''
import json, sys, time, urllib.request
front, direct, route, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
body = json.dumps({"prompt": "front latency", "max_tokens": 4, "temperature": 0}).encode()
def once(base, kind):
    if kind == "completion":
        req = urllib.request.Request(base + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    else:
        req = urllib.request.Request(base + route)
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=60) as r:
        r.read()
        assert r.status == 200, r.status
    return (time.perf_counter() - t) * 1000
out = {}
for kind in ("completion", "health"):
    for _ in range(5):  # warm both paths (connections, the proxy's first request)
        once(front, kind), once(direct, kind)
    pairs = [(once(front, kind), once(direct, kind)) for _ in range(rounds)]
    out[kind] = pairs
print(json.dumps(out))
'''


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--first", type=int, default=58)
    ap.add_argument("--requests", type=int, default=200, help="requests of each kind on each path")
    ap.add_argument("--keep", action="store_true", help="leave the lab hosts up")
    a = ap.parse_args()
    cluster, proxy_host = f"lab{a.first}", f"pd-p{a.first}"
    inv = lab_inventory(tempfile.mkdtemp(prefix="bench-front-"), a.first,
                        group_vars={cluster: {"vllm_pd_proxy_front": "haproxy"}})
    lab = Lab(inv)
    try:
        lab.up()
        br.playbook(str(inv), "playbooks/deploy_pd.yml")
        ip = lab.hosts[proxy_host]["data_ip"]
        lab.guard(ip)
        port = proxy_front.process_ports(proxy_front.DEFAULT_BASE_PORT, proxy_front.DEFAULT_PROCESSES)[0]
        route = releases.runtime(None)["proxy_health_route"]
        script = base64.b64encode(PROBE.encode()).decode()
        out = lab.run(proxy_host, f"python3 -c \"$(echo {script} | base64 -d)\" http://{ip}:8000 "
                                  f"http://127.0.0.1:{port} {route} {a.requests}").stdout
        data = json.loads(out)
        print(f"cluster {cluster}: 1P1D, front (HAProxy) on {ip}:8000, proxy process 1 on 127.0.0.1:{port}; "
              f"{a.requests} requests of each kind on each path, one at a time, alternating")
        print(f"{'request':<12}{'path':<16}{'p50 ms':>9}{'p99 ms':>9}")
        for kind, pairs in data.items():
            front, direct = [f for f, _d in pairs], [d for _f, d in pairs]
            print(f"{kind:<12}{'through front':<16}{pct(front, 50):9.2f}{pct(front, 99):9.2f}")
            print(f"{'':<12}{'proxy alone':<16}{pct(direct, 50):9.2f}{pct(direct, 99):9.2f}")
            paired = [f - d for f, d in pairs]
            print(f"{'':<12}{'front adds':<16}{pct(front, 50) - pct(direct, 50):9.2f}{pct(front, 99) - pct(direct, 99):9.2f}"
                  f"   (median of paired differences {pct(paired, 50):.2f} ms)")
    finally:
        lab.close()
        if not a.keep:
            subprocess.run([os.path.join(br.BIN, "ansible-playbook"), "-i", str(inv),
                            os.path.join(br.ROOT, "playbooks", "lab_down.yml")], cwd=br.ROOT, capture_output=True,
                           check=False)


if __name__ == "__main__":
    main()
