# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: one 16-NPU host's NPU checks (npu_readiness) on the lab fakes vs. the facts sheet's
per-NPU commands run one after another as written.

Brings up cluster lab11 of lab/gen-inventory (pd-p11, pd-d11) with 16 NPUs per host, then on pd-p11:

  module  the npu_readiness module through ansible (all 16 NPUs: -link, -net_health, -ip, -tls, npu-smi
          info, hccn.conf, version files, and 16 pings to pd-d11's 16 NPUs): its own `elapsed`, and the
          wall time of the whole ansible call
  loop    for i in 0..15: hccn_tool -i $i -lldp -g; -link -g; -net_health -g; -netdetect -g; -gateway -g;
          -ip -g; -tls -g; -ping -g address D_NPU_i; then cat /etc/hccn.conf; npu-smi info
          (ascend-node-facts §5, the A2 checklist, over 16 NPUs), in one shell on the host

Prints medians, the target (module elapsed < 2 s) and loop / module. Removes lab11 at the end unless
--keep. Usage: .venv/bin/python tests/perf/bench_npu_readiness.py [--runs 5] [--keep]
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
P, D = "pd-p11", "pd-d11"
COUNT = 16


def run(*cmd, check=False, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=check, **kw)


def ansible_env():
    # minimal: "HOST | SUCCESS => {json}" per host (the json callback lives in ansible.posix)
    return dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], ANSIBLE_STDOUT_CALLBACK="minimal", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
                ANSIBLE_LOAD_CALLBACK_PLUGINS="1")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    inv = tempfile.mkdtemp(prefix="bench-npu-")
    run(os.path.join(REPO, "lab", "gen-inventory"), "--clusters", "1", "--first", "11", "--out", inv, check=True)
    with open(os.path.join(inv, "group_vars", "cluster_lab11.yml"), "w") as f:
        f.write("---\nvllm_pd_npu_count: %d\n" % COUNT)
    env = ansible_env()
    up = run(os.path.join(BIN, "ansible-playbook"), "-i", inv, "playbooks/lab_up.yml", "-e", "lab_npu_count=%d" % COUNT,
             env=dict(env, ANSIBLE_STDOUT_CALLBACK="default"))
    if up.returncode:
        sys.exit("lab_up failed:\n" + up.stdout[-3000:])
    try:
        guard = run(os.path.join(REPO, "lab", "route-guard"), "192.168.110.31", "192.168.110.32")
        if guard.returncode:
            sys.exit(guard.stderr)
        conf = run("podman", "exec", D, "cat", "/etc/hccn.conf", check=True).stdout
        peers = [dict(host=D, npu=n, address=v) for n, v in
                 ((int(k.split("_")[1]), v) for k, v in (l.split("=", 1) for l in conf.splitlines() if "=" in l)
                  if k.startswith("address_"))]
        assert len(peers) == COUNT, conf
        args = json.dumps(dict(npus=list(range(COUNT)), peers=peers))
        mod_elapsed, mod_wall, loop = [], [], []
        script = ("H=/usr/local/Ascend/driver/tools/hccn_tool; for i in $(seq 0 15); do "
                  "for c in -lldp -link -net_health -netdetect -gateway -ip -tls; do $H -i $i $c -g; done; "
                  "$H -i $i -ping -g address $(sed -n \"s/^address_$i=//p\" /etc/hccn.conf.peer); done; "
                  "cat /etc/hccn.conf; npu-smi info")
        subprocess.run(["podman", "exec", "-i", P, "sh", "-c", "cat > /etc/hccn.conf.peer"], input=conf, text=True,
                       check=True)
        for _run in range(a.runs):
            t0 = time.monotonic()
            r = run(os.path.join(BIN, "ansible"), "-i", inv, P, "-m", "vllm_pd.ascend.npu_readiness", "-a", args, env=env)
            mod_wall.append(time.monotonic() - t0)
            res = json.loads(r.stdout.split(" => ", 1)[1])
            assert not res.get("failed") and res["findings"] == [] and len(res["pings"]) == COUNT, res
            mod_elapsed.append(res["elapsed"])
            t0 = time.monotonic()
            out = run("ssh", "-i", os.path.join(REPO, ".cache", "lab", "id_ed25519"), "-o", "StrictHostKeyChecking=no",
                      "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "root@192.168.110.31", script).stdout
            loop.append(time.monotonic() - t0)
            assert out.count("0.00% packet loss") == COUNT, out[-2000:]
        me, mw, lp = statistics.median(mod_elapsed), statistics.median(mod_wall), statistics.median(loop)
        print("16-NPU host, %d runs (medians); load average %s" % (a.runs, os.getloadavg()))
        print("module  npu_readiness elapsed   %.3f s   (target < 2 s: %s)" % (me, "PASS" if me < 2 else "FAIL"))
        print("module  whole ansible call      %.3f s" % mw)
        print("loop    checklist sequentially  %.3f s   (8 hccn_tool calls x 16 NPUs + npu-smi, one ssh)" % lp)
        print("ratio   loop / module elapsed   %.1fx" % (lp / me))
        return 0 if me < 2 else 1
    finally:
        if not a.keep:
            run(os.path.join(BIN, "ansible-playbook"), "-i", inv, "playbooks/lab_down.yml", env=env)


if __name__ == "__main__":
    sys.exit(main())
