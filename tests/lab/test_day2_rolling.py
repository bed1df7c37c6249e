"""A rolling change of a running 2P2D cluster under steady load (issue 21): deploy_pd.yml with
vllm_pd_rollout=rolling applies a changed engine flag one host at a time (out of the example proxy,
drained, restarted, proven with every peer, back in), with 0 failed requests of the load generator and
the proxy's process kept; a batch whose new engine is refused by its start guard stays out of the proxy
while the rest serve, and a run after the fix converges; a cluster that cannot roll is refused first.

Cluster lab50 of lab/gen-inventory (2P2D, the real example proxy of the lab's vllm-ascend release, installed
by lab/install-proxy, with a listener pass every 0.2 s); lab51 (1P1D, the mooncake wheel proxy). The
containers are removed at the end.
"""
import base64
import json
import re
import shutil
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen
from conftest import Lab, own_lab

pytestmark = pytest.mark.lab

P1, P2, D1, D2 = "pd-p50-1", "pd-p50-2", "pd-d50-1", "pd-d50-2"
RATE = 2.0  # the 0.23 proxy drops an isolated member only at an idle pass: leave gaps on a loaded 2-core lab
ROLLING = ("-e", "vllm_pd_rollout=rolling")
ENGINES = ((P1, "prefill"), (P2, "prefill"), (D1, "decode"), (D2, "decode"))
# D2's API port taken by another process whenever its engine stops (the start guard must refuse it)
SQUAT_DROPIN = "/etc/systemd/system/vllm-pd-decode.service.d/lab-squat.conf"
SQUAT = ("import os, socket, time\n"
         "s = socket.socket()\n"
         "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
         "s.bind(('0.0.0.0', 8200))\n"
         "s.listen(8)\n"
         "if os.fork():\n"
         "    os._exit(0)\n"
         "while True:\n"
         "    time.sleep(3600)\n")
# Type=forking: systemd-run returns once the parent exited, i.e. after the bind
DROPIN = ("[Service]\nExecStopPost=/usr/bin/systemd-run --unit=lab-squat --property=Type=forking "
          "/usr/bin/python3 /usr/local/bin/lab-squat\n")


def variant(base, name, change):
    out = base.parent / f"{base.name}-{name}"
    shutil.copytree(base, out)
    (out / "group_vars" / "all" / "change.yml").write_text(change)
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    # a listener pass every 0.2 s (default 10): more passes that can find the proxy idle and drop an isolated member
    day2 = {"proxy_extra_args": ["--waiting-retry-interval", "0.2"]}
    with own_lab(tmp_path_factory, 50, prefill=2, decode=2, group_vars={"lab50": day2}) as lab:
        base = Path(lab.inventory)
        invs = {"d_flag": variant(base, "d_flag", "decode_extra_args: [--max-num-seqs, '48']\n"),
                "p_flag": variant(base, "p_flag", "decode_extra_args: [--max-num-seqs, '48']\n"
                                                  "prefill_extra_args: [--max-num-seqs, '48']\n"),
                "d_flag2": variant(base, "d_flag2", "decode_extra_args: [--max-num-seqs, '40']\n"
                                                    "prefill_extra_args: [--max-num-seqs, '48']\n")}
        labs = {k: Lab(v) for k, v in invs.items()}
        yield lab, labs
        for one in labs.values():
            one.close()


def proxy_ip(lab):
    return lab.hosts[P1]["data_ip"]


def members(lab):
    ip = proxy_ip(lab)
    lab.guard(ip)
    req = urllib.request.Request(f"http://{ip}:8000/instances/add", data=b'{"type": "prefill", "instances": []}',
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        answer = json.loads(r.read())
    return sorted(answer["current_prefill_instances"]), sorted(answer["current_decode_instances"])


def all_members(lab):
    return (sorted(f"{lab.hosts[h]['data_ip']}:8100" for h in (P1, P2)),
            sorted(f"{lab.hosts[h]['data_ip']}:8200" for h in (D1, D2)))


def pids(lab):
    out = {(h, k): lab.host(h).service(f"vllm-pd-{k}.service").systemd_properties["MainPID"] for h, k in ENGINES}
    out["proxy"] = lab.host(P1).service("vllm-pd-proxy.service").systemd_properties["MainPID"]
    return out


def under_load(lab, inv_lab, what, *args, expect_rc=0, rate=RATE, concurrency=None):
    # enough for 20 min at RATE; the closed loop (rate None) runs until the playbook ends, whatever its pace
    count = int(rate * 1200) if rate else 10 ** 6
    spec = loadgen.LoadSpec(f"http://{proxy_ip(lab)}:8000", rate=rate, concurrency=concurrency, count=count,
                            max_tokens=8, timeout=60, guard=lab.guard)
    bg = loadgen.Background(spec).start()
    r = inv_lab.playbook("playbooks/deploy_pd.yml", *ROLLING, *args, check=False)
    result = bg.stop_and_wait()
    print(f"\n{what}: completed {result['completed']} failed {result['failed']} in {result['duration_s']:.1f} s "
          f"({result['request_throughput']:.2f} req/s); e2el p99 {result['e2el_ms']['p99']} ms, "
          f"ttft p99 {result['ttft_ms']['p99']} ms; errors {result['errors'][:3]}")
    assert (r.returncode == 0) == (expect_rc == 0), Lab.failures(r) if r.returncode else r.stdout[-6000:]
    assert result["failed"] == 0, result["errors"]
    assert result["completed"] >= 50, result
    return r


def assert_nothing_changed(lab, r):
    assert set(lab.changed(r).values()) == {0}, lab.changed(r)


def test_a_cluster_that_cannot_roll_is_refused_before_any_change(tmp_path_factory):
    """1P1D with the mooncake wheel proxy: no admin API, one host per role."""
    with own_lab(tmp_path_factory, 51, group_vars={"lab51": {"proxy_script": ""}}) as lab:
        lab.playbook("playbooks/deploy_pd.yml")
        before = {h: lab.host(h).service(f"vllm-pd-{k}.service").systemd_properties["MainPID"]
                  for h, k in (("pd-p51", "prefill"), ("pd-d51", "decode"))}
        changed = Lab(variant(Path(lab.inventory), "flag", "decode_extra_args: [--max-num-seqs, '48']\n"))
        try:
            r = changed.playbook("playbooks/deploy_pd.yml", *ROLLING, check=False)
        finally:
            changed.close()
        text = " ".join(r.stdout.split())
        assert r.returncode != 0
        assert "RollingNotPossible: cluster lab51 cannot roll" in text, r.stdout[-3000:]
        # a decode change: only the role it restarts counts (issue 32)
        assert "no admin API" in text and "1 decode host(s) (pd-d51)" in text and "prefill host(s)" not in text
        assert_nothing_changed(lab, r)
        assert {h: lab.host(h).service(f"vllm-pd-{k}.service").systemd_properties["MainPID"]
                for h, k in (("pd-p51", "prefill"), ("pd-d51", "decode"))} == before


def test_roll_a_decode_flag_then_a_prefill_flag_under_load(fleet):
    lab, labs = fleet
    lab.playbook("playbooks/deploy_pd.yml")
    start = pids(lab)
    assert members(lab) == all_members(lab)

    r = under_load(lab, labs["d_flag"], "roll a decode flag")
    after_d = pids(lab)
    assert after_d["proxy"] == start["proxy"]
    assert [after_d[(h, "decode")] != start[(h, "decode")] for h in (D1, D2)] == [True, True]
    assert [after_d[(h, "prefill")] == start[(h, "prefill")] for h in (P1, P2)] == [True, True]
    assert "--max-num-seqs 48" in lab.run(D2, "cat /proc/$(systemctl show -p MainPID --value vllm-pd-decode)/cmdline | tr '\\0' ' '").stdout
    assert members(lab) == all_members(lab)
    text = " ".join(r.stdout.split())
    assert "rolling, one batch of hosts at a time: pd-p50-1 -> pd-p50-2 -> pd-d50-1 -> pd-d50-2" in text

    # (a roll converges: the run after the prefill roll below changes nothing)
    under_load(lab, labs["p_flag"], "roll a prefill flag")
    after_p = pids(lab)
    assert after_p["proxy"] == start["proxy"]
    assert [after_p[(h, "prefill")] != after_d[(h, "prefill")] for h in (P1, P2)] == [True, True]
    assert [after_p[(h, "decode")] == after_d[(h, "decode")] for h in (D1, D2)] == [True, True]
    assert members(lab) == all_members(lab)
    assert_nothing_changed(lab, labs["p_flag"].playbook("playbooks/deploy_pd.yml", *ROLLING))


def test_a_batch_refused_by_its_start_guard_stays_out_and_a_run_after_the_fix_converges(fleet):
    lab, labs = fleet
    before = pids(lab)
    # whenever D2's engine stops, a process takes its API port before the restart's start guard runs
    lab.run(D2, f"echo {base64.b64encode(SQUAT.encode()).decode()} | base64 -d > /usr/local/bin/lab-squat && "
                f"mkdir -p {Path(SQUAT_DROPIN).parent} && echo {base64.b64encode(DROPIN.encode()).decode()} | base64 -d "
                f"> {SQUAT_DROPIN} && systemctl daemon-reload")
    try:
        r = under_load(lab, labs["d_flag2"], "roll with D2's start guard refusing", expect_rc=1)
        text = " ".join(r.stdout.split())
        assert f"vllm-pd-decode.service on {D2} did not start" in text, r.stdout[-6000:]
        assert "vllm-pd start guard: refused to start vllm-pd-decode.service" in text and "8200" in text
        d2 = f"{lab.hosts[D2]['data_ip']}:8200"
        want_p, want_d = all_members(lab)
        live_p, live_d = members(lab)
        assert live_p == want_p
        # out of the proxy: gone, or listed but isolated until the proxy is idle at a listener pass
        assert d2 not in live_d or json.loads(lab.run(P1, "cat /var/lib/vllm-pd/proxy-isolated.json").stdout)[
            "isolated"]["decode"] == [d2]
        now = pids(lab)
        assert now[(D1, "decode")] != before[(D1, "decode")]       # the batch before it rolled
        assert lab.unit(D2, "vllm-pd-decode.service")[1] != "active"
    finally:
        lab.run(D2, f"systemctl stop lab-squat.service; systemctl reset-failed lab-squat.service; rm -f {SQUAT_DROPIN}; "
                    "systemctl daemon-reload", check=False)
    under_load(lab, labs["d_flag2"], "run again after the fix")
    assert lab.unit(D2, "vllm-pd-decode.service") == ("enabled", "active")
    assert members(lab) == all_members(lab)
    assert pids(lab)["proxy"] == before["proxy"]
    assert_nothing_changed(lab, labs["d_flag2"].playbook("playbooks/deploy_pd.yml", *ROLLING))


def test_traffic_that_never_leaves_the_proxy_idle_keeps_the_instance_out_named(fleet):
    """Closed-loop clients keep a request in flight at every listener pass: the example proxy never drops
    the isolated member, so a restarted D cannot come back; the run says so, no request fails, and a run
    once the traffic pauses puts it back."""
    lab, labs = fleet
    # where the test before left the cluster (alone: a first deploy, rolling, with no proxy running yet)
    labs["d_flag2"].playbook("playbooks/deploy_pd.yml", *ROLLING)
    change = "decode_extra_args: [--max-num-seqs, '36']\nprefill_extra_args: [--max-num-seqs, '48']\n"
    inv = Lab(variant(Path(lab.inventory), "d_flag3", change))
    try:
        # 8 closed-loop clients: on a loaded machine 4 could all sit between two requests at one listener pass,
        # so the proxy may drop the canary's isolation after all and the next D is the one left out
        r = under_load(lab, inv, "roll under never-idle traffic", "-e", "vllm_pd_rejoin_timeout=20",
                       expect_rc=1, rate=None, concurrency=8)
        text = " ".join(r.stdout.split())
        out = re.search(r"ProxyRejoinTimeout: cluster lab50, vllm-pd-decode.service on (pd-d50-[12]) runs and "
                        r"passed every check", text)
        assert out, "\n".join(line for line in r.stdout.splitlines() if "fatal" in line or "ERROR" in line)
        assert "the proxy still isolates it" in text, r.stdout[-4000:]
        assert lab.unit(out[1], "vllm-pd-decode.service") == ("enabled", "active")
        left_out = f"{lab.hosts[out[1]]['data_ip']}:8200"
        assert json.loads(lab.run(P1, "cat /var/lib/vllm-pd/proxy-isolated.json").stdout)["isolated"] == {
            "decode": [left_out]}
        # the doctor names it: isolated while traffic goes on; once the proxy is idle at a pass it drops it
        # (missing); the YAML callback doubles the quotes of a quoted message
        doctor = " ".join(inv.playbook("playbooks/doctor.yml", check=False).stdout.split()).replace("''", "'")
        assert (f"isolated by a rolling change P [] D ['{left_out}']" in doctor
                or f"missing P [] D ['{left_out}']" in doctor), doctor[-3000:]
        r = inv.playbook("playbooks/deploy_pd.yml", *ROLLING)        # no traffic now
        assert members(lab) == all_members(lab)
        assert not lab.host(P1).file("/var/lib/vllm-pd/proxy-isolated.json").exists
    finally:
        inv.close()
