"""A host taken out of service by deleting one line (issue 32): pd-d54-2 is removed from vllm_pd_decode only and
stays in its cluster group. deploy_pd.yml and doctor.yml still visit it (the plays target the cluster groups too)
and name its engine OrphanInstance; without vllm_pd_remove_orphans it keeps running; with it, the same run takes
it out of the example proxy, waits until it has nothing in flight, then stops, disables and removes it (unit, env
and guard files) while steady load runs through the proxy with 0 failed requests.

Cluster lab54 of lab/gen-inventory (1P2D, the real example proxy of the lab's release). The containers are
removed at the end.
"""
import json
import re
import shutil
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen
from conftest import Lab, own_lab

pytestmark = pytest.mark.lab

P, D1, D2 = "pd-p54", "pd-d54-1", "pd-d54-2"
RATE = 2.0
UNIT = "vllm-pd-decode.service"
ORPHAN = f"OrphanInstance: cluster lab54, host {D2}: {UNIT}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    day2 = {"proxy_extra_args": ["--waiting-retry-interval", "0.2"]}
    with own_lab(tmp_path_factory, 54, decode=2, group_vars={"lab54": day2}) as lab:
        lab.playbook("playbooks/deploy_pd.yml")
        base = Path(lab.inventory)
        out = base.parent / f"{base.name}-without-d2"
        shutil.copytree(base, out)
        hosts = out / "hosts.yml"
        text = hosts.read_text()
        # the one line of the decode group loses D2; the cluster group keeps it
        changed = re.sub(r"(vllm_pd_decode: \{hosts: \{[^}]*\{\}), pd-d54-2: \{\}\}\}", r"\1}}", text)
        assert changed != text and "pd-d54-2: {ansible_host" in changed
        hosts.write_text(changed)
        without = Lab(out)
        yield lab, without
        without.close()


def members(lab):
    ip = lab.hosts[P]["data_ip"]
    lab.guard(ip)
    req = urllib.request.Request(f"http://{ip}:8000/instances/add", data=b'{"type": "prefill", "instances": []}',
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        answer = json.loads(r.read())
    return sorted(answer["current_prefill_instances"]), sorted(answer["current_decode_instances"])


def member(lab, host, port):
    return f"{lab.hosts[host]['data_ip']}:{port}"


def gone(lab, host):
    return all(not lab.host(host).file(p).exists for p in (
        f"/etc/systemd/system/{UNIT}", "/etc/vllm-pd/decode.env", "/etc/vllm-pd/decode.guard.json"))


def test_doctor_and_deploy_name_the_engine_of_a_host_that_left_its_role_group(cluster):
    lab, without = cluster
    doctor = " ".join(without.playbook("playbooks/doctor.yml", check=False).stdout.split())
    assert ORPHAN in doctor, doctor[-3000:]
    r = without.playbook("playbooks/deploy_pd.yml")
    text = " ".join(r.stdout.split())
    assert ORPHAN in text and "stay as they are" in text, text[-3000:]
    # reported only: it keeps running (the proxy drops it, as the inventory says)
    assert lab.unit(D2, UNIT) == ("enabled", "active")
    assert members(lab) == ([member(lab, P, 8100)], [member(lab, D1, 8200)])
    # back into service: the base inventory again
    lab.playbook("playbooks/deploy_pd.yml")
    assert members(lab)[1] == sorted([member(lab, D1, 8200), member(lab, D2, 8200)])


def test_remove_orphans_takes_it_out_of_the_proxy_then_removes_it_under_load(cluster):
    lab, without = cluster
    assert members(lab)[1] == sorted([member(lab, D1, 8200), member(lab, D2, 8200)])
    spec = loadgen.LoadSpec(f"http://{lab.hosts[P]['data_ip']}:8000", rate=RATE, count=int(RATE * 1200), max_tokens=8,
                            timeout=60, guard=lab.guard)
    bg = loadgen.Background(spec).start()
    try:
        r = without.playbook("playbooks/deploy_pd.yml", "-e", "vllm_pd_remove_orphans=true", check=False)
    finally:
        result = bg.stop_and_wait()
    print(f"\nremove the orphan D under load: completed {result['completed']} failed {result['failed']} in "
          f"{result['duration_s']:.1f} s; errors {result['errors'][:3]}")
    assert r.returncode == 0, Lab.failures(r)
    text = " ".join(r.stdout.split())
    assert ORPHAN in text and "will be taken out of the proxy, drained, stopped, disabled and removed" in text
    assert result["failed"] == 0 and result["completed"] >= 20, result
    assert lab.unit(D2, UNIT)[1] != "active" and gone(lab, D2)
    assert members(lab) == ([member(lab, P, 8100)], [member(lab, D1, 8200)])
    # converged: the next run names nothing
    again = without.playbook("playbooks/deploy_pd.yml", "-e", "vllm_pd_remove_orphans=true")
    assert "WARNING OrphanInstance" not in again.stdout
