"""The container runtime end to end on a lab cluster of its own (lab7: pd-p7, pd-d7, 192.168.106.0/24).

`lab/gen-inventory --runtime container` makes both hosts able to run podman (lab-hosts "nested", the
image variant localhost/vllm-pd-lab:bookworm-podman, never the default lab image) and the engines run
from localhost/vllm-ascend-lab:latest, an engine image built offline inside each host (its /usr and
the stand-in, `podman import`). The roles start it as vllm-pd-prefill/decode.service =
`podman run --rm --name vllm-pd-KIND --net=host --env-file /etc/vllm-pd/KIND.env IMAGE vllm serve ...`.

Proven here, in order: a container holding a group port is named by the preflight and stopped only
once allowed as container:NAME; the deploy (smoke request through the proxy included) passes; a
request through the proxy returns text and D logs the KV transfer; every group port listens on
VLLM_HOST_IP and belongs to container vllm-pd-prefill, which is not in the unit's process tree (owner_unit
alone calls it foreign); VLLM_HOST_IP inside both containers is the data IP; a preflight with the engine
running passes (its ports are held_by_owner) and doctor.yml reports no fault; stop_pd.yml removes
both containers and starts the allowed container again. The cluster is
removed at the end (lab_down.yml of this inventory only).
"""
import json
import re
import subprocess

import pytest

from conftest import BIN, ROOT, own_lab

pytestmark = pytest.mark.lab

KV_PORT, TP = 28002, 8
HOLDER_PORT = KV_PORT + 3
ENGINE_IMAGE = "localhost/vllm-ascend-lab:latest"


@pytest.fixture(scope="module")
def clab(tmp_path_factory):
    with own_lab(tmp_path_factory, 7, runtime="container", check_down=True) as lab:
        assert lab.prefill == ["pd-p7"] and lab.decode == ["pd-d7"]
        yield lab


def module(lab, host, **args):
    """Run kv_port_group on HOST ad hoc; returns (rc, result dict)."""
    r = subprocess.run([str(BIN / "ansible"), "-i", lab.inventory, host, "-o", "-m", "vllm_pd.ascend.kv_port_group",
                        "-a", json.dumps(args)], capture_output=True, text=True, cwd=ROOT, check=False)
    m = re.search(r"=> (\{.*\})\s*$", r.stdout, re.S)
    assert m, r.stdout + r.stderr
    return r.returncode, json.loads(m.group(1))


def test_container_runtime_end_to_end(clab):
    p, d = "pd-p7", "pd-d7"
    p_ip, d_ip = clab.hosts[p]["data_ip"], clab.hosts[d]["data_ip"]

    # From a clean state (a former run of this test or a manual deploy may have left engines running).
    clab.playbook("playbooks/stop_pd.yml")
    clab.ssh(p, "rm -f /etc/vllm-pd/stopped-services")

    # A container that is not vLLM holds a group port: named, and stopped only when allowed.
    clab.ssh(p, f"podman rm -f lab-holder >/dev/null 2>&1; podman run -d --name lab-holder --net=host {ENGINE_IMAGE} "
                f"python3 -m http.server --bind {p_ip} {HOLDER_PORT}")
    clab.ssh(p, f"for i in $(seq 50); do ss -Htln 'sport = :{HOLDER_PORT}' | grep -q . && exit 0; sleep 0.2; done; exit 1")
    r = clab.playbook("playbooks/preflight.yml", check=False)
    assert r.returncode != 0
    assert "container lab-holder is not allowed" in r.stdout and "container:lab-holder" in r.stdout, r.stdout[-3000:]
    assert clab.host(p).podman("lab-holder").is_running

    r = clab.playbook("playbooks/deploy_pd.yml", "-e", json.dumps({"vllm_pd_stop_services": ["container:lab-holder"]}))
    assert not clab.host(p).podman("lab-holder").is_running
    recorded = [json.loads(line) for line in clab.host(p).file("/etc/vllm-pd/stopped-services").content_string.splitlines()]
    assert [(r["kind"], r["engine"], r["name"], r["active"]) for r in recorded] == [
        ("container", "podman", "lab-holder", True)], recorded

    # The engines are containers under their units, on the host's network.
    for host, kind in ((p, "prefill"), (d, "decode")):
        assert clab.host(host).service(f"vllm-pd-{kind}.service").is_running
        engine = clab.host(host).podman(f"vllm-pd-{kind}").inspect()
        assert engine["State"]["Running"] and engine["ImageName"] == ENGINE_IMAGE, engine["ImageName"]
        env = clab.ssh(host, f"podman exec vllm-pd-{kind} printenv VLLM_HOST_IP HCCL_IF_IP GLOO_SOCKET_IFNAME").stdout
        assert env.split() == [clab.hosts[host]["data_ip"]] * 2 + ["data0"], env
        # the image's vllm serve lists --shutdown-timeout: passed, and podman stop waits that long plus 20 s
        cmd = engine["Config"]["Cmd"]
        assert cmd[cmd.index("--shutdown-timeout") + 1] == "60", cmd
        stop = clab.ssh(host, f"systemctl show -p ExecStop --value vllm-pd-{kind}.service").stdout
        assert f"stop -t 80 vllm-pd-{kind}" in " ".join(stop.replace("argv[]=", "").split()), stop

    # A request through the proxy returns text, and D pulled the KV cache from P's container.
    clab.guard(p_ip)
    out = subprocess.run(["curl", "-sS", "-m", "60", f"http://{p_ip}:8000/v1/completions", "-H",
                          "Content-Type: application/json", "-d",
                          json.dumps({"model": "/models/lab-model", "prompt": "two faults", "max_tokens": 8})],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["choices"][0]["text"], out
    dlog = clab.ssh(d, "journalctl -u vllm-pd-decode -o cat --no-pager").stdout
    assert "KV cache transfer for request" in dlog
    plog = clab.ssh(p, "journalctl -u vllm-pd-prefill -o cat --no-pager").stdout
    assert set(re.findall(r"started listening on path: tcp://([\d.]+):\d+", plog)) == {p_ip}, plog[-2000:]

    # Every group port listens on VLLM_HOST_IP and belongs to the container, which is outside the unit.
    cid = clab.host(p).podman("vllm-pd-prefill").id
    group = dict(state="listening", kv_port=KV_PORT, tp_size=TP, host_ip=p_ip, owner_unit="vllm-pd-prefill.service",
                 timeout=5)
    rc, res = module(clab, p, owner_container="vllm-pd-prefill", **group)
    assert rc == 0, res.get("msg")
    assert sorted(h["port"] for h in res["listeners"]) == list(range(KV_PORT, KV_PORT + TP))
    assert {(h["address"], h["container"], h["container_name"]) for h in res["listeners"]} == {
        (p_ip, cid, "vllm-pd-prefill")}
    rc, res = module(clab, p, **group)
    assert rc != 0 and res["findings"][0]["check"] == "ForeignOwner", res.get("msg")
    assert "container vllm-pd-prefill" in res["msg"]

    # Re-checking while the engine runs: its ports are the owner's, not a failure; the doctor finds the
    # engines in their containers (VLLM_HOST_IP read inside, the group owned) and reports no fault.
    clab.playbook("playbooks/preflight.yml")
    report = clab.root / ".cache" / "lab" / "doctor-container.html"
    r = clab.playbook("playbooks/doctor.yml", "-e", f"vllm_pd_doctor_report={report}", check=False)
    assert r.returncode == 0, r.stdout[-4000:]

    # stop_pd.yml stops the units, and with them the containers (ExecStop/ExecStopPost).
    clab.playbook("playbooks/stop_pd.yml", "-e", "vllm_pd_restore_services=true")
    for host in (p, d):
        names = [c.name for c in clab.host(host).podman.get_containers()]
        assert not [n for n in names if n.startswith("vllm-pd-")], names
    # the allowed container was started again
    assert clab.host(p).podman("lab-holder").is_running
    clab.ssh(p, "podman rm -f -t 0 lab-holder")
