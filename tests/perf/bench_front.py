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
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lab"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rollout as br  # noqa: E402  (playbook runner)
from conftest import Lab, lab_inventory  # noqa: E402  (the lab tests' inventory and host helpers)

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front, releases  # noqa: E402
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.loadgen import percentile  # noqa: E402

PROXY_PORT = 8000  # the bench's cluster sets vllm_pd_proxy_port to it

# run on the proxy host: ROUNDS x (front, direct) for a completion and for the health route; JSON of the times in ms.
# The routes and the request body come from the release table (argv), so the probe holds no literal of the proxy.
PROBE = r'''
import json, sys, time, urllib.request
front, direct, completions, health, body, rounds = sys.argv[1:6] + [int(sys.argv[6])]
def once(base, kind):
    if kind == "completion":
        req = urllib.request.Request(base + completions, data=body.encode(), headers={"Content-Type": "application/json"})
    else:
        req = urllib.request.Request(base + health)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--first", type=int, default=58)
    ap.add_argument("--requests", type=int, default=200, help="requests of each kind on each path")
    ap.add_argument("--keep", action="store_true", help="leave the lab hosts up")
    a = ap.parse_args()
    cluster, proxy_host = f"lab{a.first}", f"pd-p{a.first}"
    inv = lab_inventory(tempfile.mkdtemp(prefix="bench-front-"), a.first,
                        group_vars={cluster: {"vllm_pd_proxy_front": "haproxy", "vllm_pd_proxy_port": PROXY_PORT}})
    lab = Lab(inv)
    try:
        lab.up()
        br.playbook(str(inv), "playbooks/deploy_pd.yml")
        ip = lab.hosts[proxy_host]["data_ip"]
        lab.guard(ip)
        port = proxy_front.process_ports(proxy_front.DEFAULT_BASE_PORT, proxy_front.DEFAULT_PROCESSES)[0]
        up = releases.runtime(None)  # the lab's release
        keys = up["completion_request"]
        body = json.dumps({keys["prompt"]: "front latency", keys["max_tokens"]: 4, keys["temperature"]: 0})
        argv = [f"http://{ip}:{PROXY_PORT}", f"http://127.0.0.1:{port}", up["proxy_completions_route"],
                up["proxy_health_route"], body, str(a.requests)]
        script = base64.b64encode(PROBE.encode()).decode()
        out = lab.run(proxy_host, f"python3 -c \"$(echo {script} | base64 -d)\" "
                                  + " ".join(shlex.quote(x) for x in argv)).stdout
        data = json.loads(out)
        print(f"cluster {cluster}: 1P1D, front (HAProxy) on {ip}:{PROXY_PORT}, proxy process 1 on 127.0.0.1:{port}; "
              f"{a.requests} requests of each kind on each path, one at a time, alternating")
        print(f"{'request':<12}{'path':<16}{'p50 ms':>9}{'p99 ms':>9}")
        for kind, pairs in data.items():
            front, direct = [f for f, _d in pairs], [d for _f, d in pairs]
            p50 = (percentile(front, 50), percentile(direct, 50))
            p99 = (percentile(front, 99), percentile(direct, 99))
            print(f"{kind:<12}{'through front':<16}{p50[0]:9.2f}{p99[0]:9.2f}")
            print(f"{'':<12}{'proxy alone':<16}{p50[1]:9.2f}{p99[1]:9.2f}")
            paired = percentile([f - d for f, d in pairs], 50)
            print(f"{'':<12}{'front adds':<16}{p50[0] - p50[1]:9.2f}{p99[0] - p99[1]:9.2f}"
                  f"   (median of paired differences {paired:.2f} ms)")
    finally:
        lab.close()
        if not a.keep:
            subprocess.run([os.path.join(br.BIN, "ansible-playbook"), "-i", str(inv),
                            os.path.join(br.ROOT, "playbooks", "lab_down.yml")], cwd=br.ROOT, capture_output=True,
                           check=False)


if __name__ == "__main__":
    main()
