"""Lab fixture for tests under tests/lab.

``lab`` (session scope) runs ``playbooks/lab_up.yml`` against ``inventory/lab``
(fails, never skips, if podman is missing), route-guards every lab address and yields
an object with:

* ``hosts``: {name: {"data_ip": ..., "mgmt_ip": ...}} from inventory/lab/hosts.yml
* ``key``: path of the SSH private key (.cache/lab/id_ed25519)
* ``inventory``: path of inventory/lab
* ``ssh(host, cmd, check=True)`` -> subprocess.CompletedProcess (route-guarded, text mode)
* ``copy(host, src, dest)``: podman cp of a local file into the container
* ``guard(addr)``: raises unless ADDR routes via a local podman bridge without a gateway

The lab is not torn down at session end; run playbooks/lab_down.yml explicitly.
"""
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "inventory" / "lab"
KEY = ROOT / ".cache" / "lab" / "id_ed25519"
SSH_OPTS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"]


def guard(addr):
    r = subprocess.run([str(ROOT / "lab" / "route-guard"), addr], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip() or f"route-guard refused {addr}")


def _hosts():
    inv = yaml.safe_load((INVENTORY / "hosts.yml").read_text())
    out = {}
    for grp in inv["all"]["children"].values():
        for name, hv in (grp.get("hosts") or {}).items():
            if hv and "ansible_host" in hv:
                out[name] = {"data_ip": hv["ansible_host"], "mgmt_ip": hv["lab_mgmt_ip"]}
    return out


class Lab:
    def __init__(self):
        self.hosts = _hosts()
        self.key = str(KEY)
        self.inventory = str(INVENTORY)

    guard = staticmethod(guard)

    def ssh(self, host, cmd, check=True):
        ip = self.hosts[host]["data_ip"]
        guard(ip)
        return subprocess.run(["ssh", "-i", self.key, *SSH_OPTS, f"root@{ip}", cmd],
                              capture_output=True, text=True, check=check, timeout=120)

    def copy(self, host, src, dest):
        subprocess.run(["podman", "cp", str(src), f"{host}:{dest}"], check=True)

    def playbook(self, name, *args):
        return subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", self.inventory,
                               str(ROOT / "playbooks" / name), *args],
                              capture_output=True, text=True, cwd=ROOT)


@pytest.fixture(scope="session")
def lab():
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: the lab needs podman (apt-get install podman runc debootstrap)")
    lab = Lab()
    r = lab.playbook("lab_up.yml")
    if r.returncode != 0:
        pytest.fail(f"lab_up.yml failed:\n{r.stdout[-4000:]}\n{r.stderr[-2000:]}")
    for h in lab.hosts.values():
        guard(h["data_ip"])
    yield lab
