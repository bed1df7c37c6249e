"""Benchmark: deploy_pd.yml for 1 cluster and for N clusters (default 8) of the lab, in one run.

Clusters lab<F>..lab<F+N-1> of lab/gen-inventory (default F=3, so the default lab1 is left alone)
are brought up, every engine is stopped, then deploy_pd.yml runs with --limit to the first cluster,
engines are stopped again, and deploy_pd.yml runs for all N clusters. Prints the wall times, their
ratio (target <= 1.5) and the overhead per cluster beyond the stand-in's startup delay, which P and
D pay one after the other (target <= 20 s). Lab containers only; every address is route-guarded.

Usage: .venv/bin/python tests/perf/bench_rollout.py [--clusters 8] [--first 3] [--keep]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")


def playbook(inv, name, *args):
    start = time.monotonic()
    r = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inv, os.path.join(ROOT, name), *args],
                       capture_output=True, text=True, cwd=ROOT, check=False)
    if r.returncode != 0:
        sys.exit(f"{name} {' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-1000:]}")
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--clusters", type=int, default=8)
    ap.add_argument("--first", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="leave the lab hosts up")
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
    try:
        playbook(inv, "playbooks/stop_pd.yml")
        one = playbook(inv, "playbooks/deploy_pd.yml", "--limit", f"cluster_lab{a.first}")
        playbook(inv, "playbooks/stop_pd.yml")
        many = playbook(inv, "playbooks/deploy_pd.yml")
        playbook(inv, "playbooks/stop_pd.yml")
    finally:
        if not a.keep:
            playbook(inv, "playbooks/lab_down.yml")
    print(f"lab up ({2 * a.clusters} hosts): {up:.1f} s; stand-in startup delay {delay:.0f} s (P, then D)")
    print(f"deploy 1 cluster:  {one:.1f} s   overhead beyond the delays {one - 2 * delay:.1f} s (target <= 20)")
    print(f"deploy {a.clusters} clusters: {many:.1f} s   overhead per cluster {(many - 2 * delay) / a.clusters:.1f} s")
    print(f"ratio {a.clusters} / 1 = {many / one:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
