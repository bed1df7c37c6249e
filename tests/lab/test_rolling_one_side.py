"""A rolling change needs two hosts only in the roles whose engines it restarts (issue 32). Cluster lab53 of
lab/gen-inventory (1P2D, the real example proxy of the lab's release): a new decode_env value rolls the two
D hosts one at a time under steady load with 0 failed requests while P keeps running untouched; a prefill change
is still refused before any change, naming the single P (RollingNotPossible). The containers are removed at the end.
"""
import json
import shutil
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen
from conftest import Lab, own_lab

pytestmark = pytest.mark.lab

P, D1, D2 = "pd-p53", "pd-d53-1", "pd-d53-2"
ROLLING = ("-e", "vllm_pd_rollout=rolling")
RATE = 2.0
ENGINES = ((P, "prefill"), (D1, "decode"), (D2, "decode"))
# the lab's engine env plus one variable on D only (not one of those P and D must share)
D_ENV = ("decode_env: \"{{ vllm_pd_engine_env | combine({'LAB_ROLL_MARK': '32'}) }}\"\n")


def variant(base, name, change):
    out = base.parent / f"{base.name}-{name}"
    shutil.copytree(base, out)
    (out / "group_vars" / "all" / "change.yml").write_text(change)
    return Lab(out)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    day2 = {"proxy_extra_args": ["--waiting-retry-interval", "0.2"]}
    with own_lab(tmp_path_factory, 53, decode=2, group_vars={"lab53": day2}) as lab:
        lab.playbook("playbooks/deploy_pd.yml")
        yield lab


def pids(lab):
    out = {(h, k): lab.host(h).service(f"vllm-pd-{k}.service").systemd_properties["MainPID"] for h, k in ENGINES}
    out["proxy"] = lab.host(P).service("vllm-pd-proxy.service").systemd_properties["MainPID"]
    return out


def failures(r):
    """The failed tasks of a run (the tail of a long run's output may not hold them)."""
    lines = r.stdout.splitlines()
    return "\n".join(line[:2000] for i, line in enumerate(lines) if line.startswith(("fatal:", "failed:"))
                     or (i and lines[i - 1].startswith("TASK [") and "fatal" in line)) or r.stdout[-6000:]


def members(lab):
    ip = lab.hosts[P]["data_ip"]
    lab.guard(ip)
    req = urllib.request.Request(f"http://{ip}:8000/instances/add", data=b'{"type": "prefill", "instances": []}',
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        answer = json.loads(r.read())
    return sorted(answer["current_prefill_instances"]), sorted(answer["current_decode_instances"])


def test_a_decode_change_rolls_on_one_prefill_host_under_load(cluster):
    lab = cluster
    before, all_members = pids(lab), members(lab)
    changed = variant(Path(lab.inventory), "d_env", D_ENV)
    spec = loadgen.LoadSpec(f"http://{lab.hosts[P]['data_ip']}:8000", rate=RATE, count=int(RATE * 1200), max_tokens=8,
                            timeout=60, guard=lab.guard)
    bg = loadgen.Background(spec).start()
    try:
        r = changed.playbook("playbooks/deploy_pd.yml", *ROLLING, check=False)
    finally:
        result = bg.stop_and_wait()
        changed.close()
    print(f"\nroll decode_env on 1P2D: completed {result['completed']} failed {result['failed']} in "
          f"{result['duration_s']:.1f} s; errors {result['errors'][:3]}")
    assert r.returncode == 0, failures(r)
    assert result["failed"] == 0 and result["completed"] >= 50, result
    after = pids(lab)
    assert after[(P, "prefill")] == before[(P, "prefill")] and after["proxy"] == before["proxy"]
    assert [after[(h, "decode")] != before[(h, "decode")] for h in (D1, D2)] == [True, True]
    for h in (D1, D2):
        environ = lab.run(h, "tr '\\0' '\\n' < /proc/$(systemctl show -p MainPID --value vllm-pd-decode)/environ").stdout
        assert "LAB_ROLL_MARK=32" in environ.splitlines()
    assert members(lab) == all_members


def test_a_prefill_change_on_one_prefill_host_is_still_refused(cluster):
    lab = cluster
    before = pids(lab)
    changed = variant(Path(lab.inventory), "p_flag", D_ENV + "prefill_extra_args: [--max-num-seqs, '48']\n")
    try:
        r = changed.playbook("playbooks/deploy_pd.yml", *ROLLING, check=False)
    finally:
        changed.close()
    text = " ".join(r.stdout.split())
    assert r.returncode != 0
    assert "RollingNotPossible: cluster lab53 cannot roll" in text, r.stdout[-3000:]
    assert "1 prefill host(s) (pd-p53) and the change restarts its prefill engines" in text
    assert "decode host(s)" not in text and "no admin API" not in text
    assert set(lab.changed(r).values()) == {0}, lab.changed(r)
    assert pids(lab) == before
