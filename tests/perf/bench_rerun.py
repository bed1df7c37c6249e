"""Benchmark: first deploy, converged re-run and a no-op playbook of one lab cluster, in one run (issue 36).

Cluster lab<F> of lab/gen-inventory (default F=59, 1P1D, a cluster no lab test uses) is brought up and its
engines stopped; then, one after the other on the same hosts:
  first deploy      deploy_pd.yml from stopped engines
  converged re-run  deploy_pd.yml again, with nothing to change
  no-op playbook    one ansible.builtin.ping per host, the floor of any playbook on these hosts
Prints each wall time, the tasks run on the busiest host (ok + changed + skipped of its PLAY RECAP), and the
ratios re-run / no-op (target <= 6) and re-run wall (target <= 8 s), with the controller CPU by task of the
re-run (tests/perf/callback). Lab containers only; every address is route-guarded.

Usage: .venv/bin/python tests/perf/bench_rerun.py [--first 59] [--keep] [--top 12] [--prefill 1 --decode 1]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rollout as br  # noqa: E402  (the lab helpers and the CPU-per-task report)

NOOP = """---
- name: No-op (the floor of a playbook on these hosts)
  hosts: vllm_pd_prefill:vllm_pd_decode:vllm_pd_proxy
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
"""
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)


def tasks_per_host(output):
    """{host: tasks run} from the PLAY RECAP of a playbook's output (ok counts the changed ones too)."""
    return dict((m[0], int(m[1]) + int(m[5])) for m in RECAP.findall(output[-1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--first", type=int, default=59)
    ap.add_argument("--prefill", type=int, default=1)
    ap.add_argument("--decode", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="leave the lab hosts up")
    ap.add_argument("--top", type=int, default=12, help="tasks of the re-run to list by controller CPU")
    a = ap.parse_args()
    inv = tempfile.mkdtemp(prefix="bench-rerun-")
    subprocess.run([os.path.join(br.ROOT, "lab", "gen-inventory"), "--clusters", "1", "--first", str(a.first),
                    "--prefill", str(a.prefill), "--decode", str(a.decode), "--out", inv], check=True)
    noop = os.path.join(inv, "noop.yml")
    with open(noop, "w", encoding="utf-8") as f:
        f.write(NOOP)
    hv = json.loads(subprocess.run([os.path.join(br.BIN, "ansible-inventory"), "-i", inv, "--list"], check=True,
                                   capture_output=True, text=True, cwd=br.ROOT).stdout)["_meta"]["hostvars"]
    br.playbook(inv, "playbooks/lab_up.yml")
    for v in hv.values():
        subprocess.run([os.path.join(br.ROOT, "lab", "route-guard"), v["ansible_host"]], check=True)
    hosts, first_out, rerun_out = sorted(hv), [], []
    try:
        br.playbook(inv, "playbooks/stop_pd.yml")
        br.playbook(inv, noop)  # SSH masters up, as for the playbooks after it
        first = br.playbook(inv, "playbooks/deploy_pd.yml", output=first_out)
        rerun = br.measured(inv, hosts, "playbooks/deploy_pd.yml", output=rerun_out)
        floor = br.playbook(inv, noop)
    finally:
        if not a.keep:
            br.playbook(inv, "playbooks/lab_down.yml")
    first_tasks, rerun_tasks = tasks_per_host(first_out), tasks_per_host(rerun_out)
    busiest = max(rerun_tasks, key=rerun_tasks.get)
    print(f"cluster lab{a.first}: {a.prefill}P{a.decode}D, {len(hv)} hosts")
    print(f"first deploy:     {first:6.1f} s   {max(first_tasks.values())} tasks on the busiest host")
    print(f"converged re-run: {rerun['wall']:6.1f} s   {rerun_tasks[busiest]} tasks on {busiest} (target <= 8 s, <= 50 tasks)")
    print(f"no-op playbook:   {floor:6.1f} s")
    print(f"ratio re-run / no-op = {rerun['wall'] / floor:.1f} (target <= 6)")
    br.report("converged re-run", rerun, len(hosts), a.top)


if __name__ == "__main__":
    main()
