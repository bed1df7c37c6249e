"""Allowed holders stay off, for a container (issue 13 item 2): an allowed container with a restart policy is
stopped, its policy and state recorded, and `stop_pd.yml -e vllm_pd_restore_services=true` starts it again.

Cluster lab14 as a container-runtime cluster (lab/gen-inventory --runtime container: its hosts run podman 4.3
themselves). podman 4.3 has no `podman update --restart`, so the policy stays "always" and the record says
restart_policy_changed false (docs: README "Allowed holders stay off"). The cluster is removed at the end.
A separate file from test_holders_off.py: both use lab14, with different host images.
"""
import json
import re
import shlex
import subprocess
import time

import pytest

from conftest import BIN, ROOT, own_lab

pytestmark = pytest.mark.lab

P = "pd-p14"


@pytest.fixture(scope="module")
def clab14(tmp_path_factory):
    """lab14 as a container-runtime cluster: its hosts run podman (4.3, Debian bookworm) themselves."""
    with own_lab(tmp_path_factory, 14, runtime="container") as lab:
        yield lab


def adhoc(lab, host, **args):
    """kv_port_group on HOST ad hoc -> (rc, result dict, output); warnings are in the output, not the result."""
    r = subprocess.run([str(BIN / "ansible"), "-i", lab.inventory, host, "-o", "-b", "-m",
                        "vllm_pd.ascend.kv_port_group", "-a", json.dumps(args)],
                       capture_output=True, text=True, cwd=ROOT, check=False)
    m = re.search(r"=> (\{.*\})\s*$", r.stdout, re.S)
    assert m, r.stdout + r.stderr
    return r.returncode, json.loads(m.group(1)), " ".join((r.stdout + r.stderr).split())


def test_allowed_container_with_restart_policy_is_recorded_and_restored(clab14):
    """podman 4.3 has no "update --restart": the policy stays, the module warns and records that it did not change
    it; the restore starts the container again and leaves its policy alone."""
    ip = clab14.hosts[P]["data_ip"]
    host = clab14.host(P)
    clab14.run(P, "podman rm -f -t 0 lab-holder >/dev/null 2>&1; podman run -d --restart always --name lab-holder "
                  f"--net=host localhost/vllm-ascend-lab:latest python3 -m http.server --bind {ip} 28005")
    deadline = time.time() + 10
    while (ip, 28005) not in clab14.listening(P):
        assert time.time() < deadline, "lab-holder does not listen on 28005"
        time.sleep(0.2)
    args = dict(kv_port=28002, tp_size=8, host_ip=ip, npu_count=8, stop_services=["container:lab-holder"], timeout=20)
    rc, res, _out = adhoc(clab14, P, **args)
    assert rc == 0, res.get("msg")
    off = res["holders_off"]
    assert [(o["kind"], o["engine"], o["name"], o["restart_policy"], o["set_restart_no"]) for o in off] == [
        ("container", "podman", "lab-holder", "always", True)], off
    assert off[0]["restart_policy_changed"] is False
    # the policy is still "always" (the module's warning says so; the oneline output does not carry warnings)
    holder = host.podman("lab-holder")
    assert holder.inspect()["HostConfig"]["RestartPolicy"]["Name"] == "always"
    assert not holder.is_running
    clab14.run(P, "mkdir -p /etc/vllm-pd && printf '%s\\n' " + shlex.quote(json.dumps(off[0], sort_keys=True))
               + " > /etc/vllm-pd/stopped-services")
    assert clab14.record(P) == [off[0]]
    clab14.playbook("playbooks/stop_pd.yml", "-e", "vllm_pd_restore_services=true")
    assert holder.is_running
    assert holder.inspect()["HostConfig"]["RestartPolicy"]["Name"] == "always"
    assert not host.file("/etc/vllm-pd/stopped-services").exists
    clab14.run(P, "podman rm -f -t 0 lab-holder")
