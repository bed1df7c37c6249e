"""Benchmark: how fast deploy_pd.yml of one lab cluster refuses a broken cluster, before any change (issues 22, 36).

Three faults, each on a fresh cluster with no engine yet:
  busy     a plain process holds a port of P's kv_port group (lab fixture conflict_process): the
           preflight must name the port (PortBusy)
  address  P's vllm_pd_host_ip is its mgmt address, which D cannot reach: the preflight must name
           both hosts and addresses ("cannot reach prefill host")
  window   P's vllm_pd_kv_port puts the group inside the ADXL/RDMA window: the inventory validation must name it
           (AdxlWindow) before any host is contacted
Prints per fault the median time until the output first names it (issue 36's target: at most 3 s) and until
deploy_pd.yml ends (the other hosts finish their checks, so every finding is reported at once), of --runs
refusals, both as ratios to issue 36's measurement (busy 8.9 s, address 9.8 s, window 9.3 s), and where the time
goes (controller CPU and wall per task, tests/perf/callback). Exit status 1 when a named median misses 3 s.

Cluster lab<F> of lab/gen-inventory (default F=42, so other clusters are left alone). Lab containers only;
every address is route-guarded.

Usage: .venv/bin/python tests/perf/bench_preflight_answer.py [--first 42] [--runs 3] [--keep] [--top 8]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_rollout import BIN, CALLBACKS, ROOT, children_cpu, container_cpu, machine_busy, playbook, report

BASELINE = {"busy": 8.9, "address": 9.8, "window": 9.3}
TARGET = 3.0
WINDOW_KV_PORT = 20100  # its group lies inside the ADXL window 20000-27999 of the lab's 8 NPUs
BUSY_PORT_OFFSET = 3  # a port inside the group, not its first


def refused(inv, hosts, limit, expect):
    """deploy_pd.yml --limit LIMIT must fail naming EXPECT; returns the measurement of bench_rollout.measured."""
    fd, cpu_file = tempfile.mkstemp(prefix="bench-cpu-", suffix=".json")
    os.close(fd)
    env = {**os.environ, "ANSIBLE_CALLBACK_PLUGINS": CALLBACKS, "ANSIBLE_CALLBACKS_ENABLED": "cpu_per_task",
           "BENCH_CPU_OUT": cpu_file}
    c0, m0, h0 = children_cpu(), machine_busy(), container_cpu(hosts)
    start = time.monotonic()
    named, lines = None, []
    # stdout as it comes: the failing task prints the finding before the other hosts finish their checks
    with subprocess.Popen([os.path.join(BIN, "ansible-playbook"), "-i", inv,
                           os.path.join(ROOT, "playbooks", "deploy_pd.yml"), "--limit", limit],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env) as proc:
        for line in proc.stdout:
            lines.append(line)
            if named is None and expect in line:
                named = time.monotonic() - start
    wall = time.monotonic() - start
    c1, m1, h1 = children_cpu(), machine_busy(), container_cpu(hosts)
    out = "".join(lines)
    if proc.returncode == 0 or named is None:
        sys.exit(f"deploy_pd.yml did not refuse with {expect!r} (rc {proc.returncode}):\n{out[-4000:]}")
    if "TASK [vllm_pd.ascend.engine : Write" in out:
        sys.exit("the refusal came after a change")
    with open(cpu_file, encoding="utf-8") as f:
        tasks = json.load(f)
    os.unlink(cpu_file)
    return {"wall": wall, "named": named, "controller": c1 - c0, "lab": sum(h1[h] - h0[h] for h in hosts), "machine": m1 - m0,
            "tasks": tasks}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--first", type=int, default=42)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="leave the lab hosts up")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    inv = tempfile.mkdtemp(prefix="bench-preflight-")
    subprocess.run([os.path.join(ROOT, "lab", "gen-inventory"), "--clusters", "1", "--first", str(a.first), "--out", inv],
                   check=True)
    hv = json.loads(subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", inv, "--list"], check=True,
                                   capture_output=True, text=True, cwd=ROOT).stdout)["_meta"]["hostvars"]
    p, d = f"pd-p{a.first}", f"pd-d{a.first}"
    playbook(inv, "playbooks/lab_up.yml")
    for v in hv.values():
        subprocess.run([os.path.join(ROOT, "lab", "route-guard"), v["ansible_host"], v["lab_mgmt_ip"]], check=True)
    limit, hosts = f"cluster_lab{a.first}", sorted(hv)
    busy = int(hv[p]["vllm_pd_kv_port"]) + BUSY_PORT_OFFSET
    results = {}
    try:
        playbook(inv, "playbooks/stop_pd.yml")
        playbook(inv, "lab/fixtures.yml", "-e", json.dumps({"lab_fixture_hosts": p, "lab_fixtures": ["conflict_process"],
                                                            "lab_conflict_process_port": busy}))
        results["busy"] = [refused(inv, hosts, limit, f"{busy}") for _run in range(a.runs)]
        playbook(inv, "lab/fixtures.yml", "-e", "lab_fixture_state=absent")
        os.makedirs(os.path.join(inv, "host_vars"), exist_ok=True)
        with open(os.path.join(inv, "host_vars", f"{p}.yml"), "w", encoding="utf-8") as f:
            f.write(f"---\nvllm_pd_host_ip: {hv[p]['lab_mgmt_ip']}\n")
        results["address"] = [refused(inv, hosts, limit, f"decode host {d}") for _run in range(a.runs)]
        with open(os.path.join(inv, "host_vars", f"{p}.yml"), "w", encoding="utf-8") as f:
            f.write(f"---\nvllm_pd_kv_port: {WINDOW_KV_PORT}\n")
        results["window"] = [refused(inv, hosts, limit, "[AdxlWindow]") for _run in range(a.runs)]
    finally:
        if not a.keep:
            playbook(inv, "playbooks/lab_down.yml")
    for name, runs in results.items():
        walls, named = [m["wall"] for m in runs], [m["named"] for m in runs]
        med, first = statistics.median(walls), statistics.median(named)
        print(f"{name}: named in {first:.2f} s, playbook refused in {med:.2f} s (medians of {len(walls)}: "
              f"{', '.join(f'{n:.2f}/{w:.2f}' for n, w in zip(named, walls))}); ratio to baseline {BASELINE[name]} s: "
              f"named {first / BASELINE[name]:.2f}, refused {med / BASELINE[name]:.2f}; target: named within {TARGET} s: "
              f"{'OK' if first <= TARGET else 'MISSED'}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        report(f"{name} (last run)", runs[-1], len(hosts), a.top)
    return 0 if all(statistics.median(m["named"] for m in r) <= TARGET for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
