"""Benchmark: deploy_pd.yml for 1 cluster and for N clusters (default 8) of the lab, in one run.

Clusters lab<F>..lab<F+N-1> of lab/gen-inventory (default F=16, so the lab tests' lab1..lab8 are left alone;
with the default N=8 that is lab16..lab23: pass --first and --clusters to stay on clusters of your own)
are brought up, every engine is stopped, then deploy_pd.yml runs with --limit to the first cluster,
engines are stopped again, and deploy_pd.yml runs for all N clusters. Prints the wall times, their
ratio (target <= 1.5) and the overhead per cluster beyond the stand-in's startup delay, which P and
D pay one after the other (target <= 10 s for one cluster). Lab containers only; every address is route-guarded.

Where the time goes, per deploy: the controller's CPU seconds (ansible-playbook and every process
it waited for, from getrusage), per host and per task (the callback in tests/perf/callback), the
lab hosts' own CPU seconds (their containers' cpuacct cgroups: the stand-in engines, sshd and the
modules; the floor the controller cannot remove), and the whole machine's busy CPU seconds against
what its cores could give in that wall time (other users of the machine count there too).

Usage: .venv/bin/python tests/perf/bench_rollout.py [--clusters 8] [--first 16] [--keep] [--top 12]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")


CALLBACKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "callback")
CPUACCT = "/sys/fs/cgroup/cpuacct"


def playbook(inv, name, *args, env=None, output=None):
    """Wall seconds of a playbook that must succeed; OUTPUT (a list) gets its stdout."""
    start = time.monotonic()
    r = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inv, os.path.join(ROOT, name), *args],
                       capture_output=True, text=True, cwd=ROOT, check=False, env={**os.environ, **(env or {})})
    if r.returncode != 0:
        # the whole output in a file: the failing host's task is often far above the recap
        fd, log = tempfile.mkstemp(prefix="bench-failed-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(r.stdout + r.stderr)
        sys.exit(f"{name} {' '.join(args)} failed (whole output in {log}):\n{r.stdout[-3000:]}\n{r.stderr[-1000:]}")
    if output is not None:
        output.append(r.stdout)
    return time.monotonic() - start


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def machine_busy():
    """Busy CPU seconds of the whole machine so far (all cores), from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def container_cpu(names):
    """CPU seconds used so far by each lab container (cgroup v1 cpuacct; cgroup v2 cpu.stat)."""
    out = {}
    for name in names:
        path = subprocess.run(["podman", "inspect", "-f", "{{.State.CgroupPath}}", name], capture_output=True,
                              text=True, check=True).stdout.strip()
        v1, v2 = f"{CPUACCT}{path}/cpuacct.usage", f"/sys/fs/cgroup{path}/cpu.stat"
        if os.path.exists(v1):
            with open(v1, encoding="ascii") as f:
                out[name] = int(f.read()) / 1e9
        else:
            with open(v2, encoding="ascii") as f:
                out[name] = int(dict(line.split() for line in f)["usage_usec"]) / 1e6
    return out


def measured(inv, hosts, name, *args, output=None):
    """Run a playbook with the CPU callback; returns wall, controller, lab hosts, machine and per-task CPU."""
    fd, out = tempfile.mkstemp(prefix="bench-cpu-", suffix=".json")
    os.close(fd)
    env = {"ANSIBLE_CALLBACK_PLUGINS": CALLBACKS, "ANSIBLE_CALLBACKS_ENABLED": "cpu_per_task", "BENCH_CPU_OUT": out}
    c0, m0, h0 = children_cpu(), machine_busy(), container_cpu(hosts)
    wall = playbook(inv, name, *args, env=env, output=output)
    c1, m1, h1 = children_cpu(), machine_busy(), container_cpu(hosts)
    with open(out, encoding="utf-8") as f:
        tasks = json.load(f)
    os.unlink(out)
    return {"wall": wall, "controller": c1 - c0, "lab": sum(h1[h] - h0[h] for h in hosts), "machine": m1 - m0,
            "tasks": tasks}


def report(label, m, nhosts, top):
    cores = os.cpu_count() or 1
    print(f"{label}: wall {m['wall']:.1f} s; CPU seconds: controller {m['controller']:.1f} "
          f"({m['controller'] / nhosts:.2f} per host, {nhosts} hosts), lab hosts {m['lab']:.1f} "
          f"({m['lab'] / nhosts:.2f} per host), whole machine {m['machine']:.1f} of {cores * m['wall']:.1f} "
          f"({cores} cores x wall)")
    # the floor: the lab hosts' own CPU spread over the machine's cores, the wall time if the controller cost nothing
    print(f"  floor: lab hosts' CPU / {cores} cores = {m['lab'] / cores:.1f} s; controller + lab hosts "
          f"{m['controller'] + m['lab']:.1f} s of {m['machine']:.1f} busy (the rest: other users of the machine)")
    tasks = sorted(m["tasks"], key=lambda t: -t["cpu"])
    print(f"  controller CPU by task (top {top} of {len(tasks)}; {sum(t['runs'] for t in tasks)} host-task runs):")
    for t in tasks[:top]:
        per = t["cpu"] / t["runs"] if t["runs"] else 0.0
        print(f"    {t['cpu']:6.2f} s  {t['runs']:4d} runs  {per:5.3f} s/run  {t['wall']:6.1f} s wall  "
              f"{(t['role'] + ' : ') if t['role'] else ''}{t['task'][:80]}")
    slow = sorted(m["tasks"], key=lambda t: -t["wall"])[:top]
    print(f"  wall by task (top {top}): " + "; ".join(f"{t['wall']:.1f} s {t['task'][:50]}" for t in slow))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--clusters", type=int, default=8)
    ap.add_argument("--first", type=int, default=16)
    ap.add_argument("--keep", action="store_true", help="leave the lab hosts up")
    ap.add_argument("--top", type=int, default=12, help="tasks to list by controller CPU")
    a = ap.parse_args()
    inv = tempfile.mkdtemp(prefix="bench-rollout-")
    subprocess.run([os.path.join(ROOT, "lab", "gen-inventory"), "--clusters", str(a.clusters),
                    "--first", str(a.first), "--out", inv], check=True)
    hv = json.loads(subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", inv, "--list"], check=True,
                                   capture_output=True, text=True, cwd=ROOT).stdout)["_meta"]["hostvars"]
    delay = float(next(iter(hv.values()))["vllm_pd_engine_env"]["VLLM_LAB_STARTUP_DELAY"])
    up = playbook(inv, "playbooks/lab_up.yml")
    for v in hv.values():
        subprocess.run([os.path.join(ROOT, "lab", "route-guard"), v["ansible_host"]], check=True)
    hosts = sorted(hv)
    first = sorted(h for h, v in hv.items() if v["vllm_pd_cluster"] == f"lab{a.first}")
    try:
        playbook(inv, "playbooks/stop_pd.yml")
        m1 = measured(inv, first, "playbooks/deploy_pd.yml", "--limit", f"cluster_lab{a.first}")
        playbook(inv, "playbooks/stop_pd.yml")
        mn = measured(inv, hosts, "playbooks/deploy_pd.yml")
        playbook(inv, "playbooks/stop_pd.yml")
    finally:
        if not a.keep:
            playbook(inv, "playbooks/lab_down.yml")
    one, many = m1["wall"], mn["wall"]
    print(f"lab up ({2 * a.clusters} hosts): {up:.1f} s; stand-in startup delay {delay:.0f} s (P, then D)")
    print(f"deploy 1 cluster:  {one:.1f} s   overhead beyond the delays {one - 2 * delay:.1f} s (target <= 10)")
    print(f"deploy {a.clusters} clusters: {many:.1f} s   overhead per cluster {(many - 2 * delay) / a.clusters:.1f} s")
    print(f"ratio {a.clusters} / 1 = {many / one:.2f} (target <= 1.5)")
    report("deploy 1 cluster", m1, len(first), a.top)
    report(f"deploy {a.clusters} clusters", mn, len(hosts), a.top)


if __name__ == "__main__":
    main()
