"""The ``lab`` session fixture for tests that need the podman lab hosts.

Any test that takes ``lab`` is marked ``lab`` automatically (``pytest -m "not lab"`` skips them).
The fixture runs ``playbooks/lab_up.yml`` once per session (idempotent: a running lab costs ~6 s,
from nothing ~8 s with the image present), route-guards every lab address, and yields a ``Lab``:

    lab.root          repository root (Path)
    lab.inventory     inventory path (str); env VLLM_PD_LAB_INVENTORY overrides inventory/lab,
                      e.g. a lab/gen-inventory output
    lab.key           SSH private key (str), .cache/lab/id_ed25519 unless the inventory names another
    lab.hosts         {name: {"data_ip", "mgmt_ip", "mgmt_gw", "cluster", "groups": [...]}}
    lab.prefill / lab.decode / lab.proxy    host names per PD group (inventory order)
    lab.clusters      {cluster: [host names]}
    lab.guard(addr)   raise unless ADDR routes via a local podman bridge with no gateway
    lab.ssh(host, cmd, check=True, timeout=120) -> CompletedProcess (text); root over SSH to the
                      data IP, guarded first; connections are multiplexed (one master per host)
    lab.host(host)    a testinfra Host over the same guarded, multiplexed SSH (host.service,
                      host.socket, host.file, host.process, host.podman ...); the route guard runs
                      before every command it sends. Use it for host assertions; lab.ssh for actions
                      and for what testinfra does not read (socket owners, journals, cgroups)
    lab.listening(host) -> {(address, port)} of the host's listening TCP sockets (testinfra)
    lab.ports(host)   -> {port} of the same sockets, whatever the address
    lab.unit(host, name) -> (UnitFileState, ActiveState) of a systemd unit, e.g. ("enabled", "active")
    lab.run(host, cmd, check=True) -> testinfra CommandResult (.rc .stdout .stderr) of an action on
                      HOST, guarded like every testinfra command; check=True asserts rc 0. testinfra
                      raises RuntimeError when ssh cannot connect (rc 255), e.g. while a host restarts
    lab.owner(host, port) -> /proc/PID/cgroup of the process listening on PORT ("" when none):
                      which unit holds a port (ss names the pid, testinfra reads the cgroup)
    lab.record(host)  -> the JSON lines of /etc/vllm-pd/stopped-services as dicts, None when absent
    lab.copy(host, src, dest)   put a local file into the container (podman cp, no network)
    lab.playbook(path, *args, check=True) -> CompletedProcess of ansible-playbook -i lab.inventory;
                      PATH relative to the repository (e.g. "playbooks/deploy_pd.yml")
    lab.fixtures(host, names, state="present", **vars)  run lab/fixtures.yml on HOST with NAMES
                      (conflict_service, conflict_process, residue) or state="absent" (undo all)
    lab.changed(result) -> {host: changed count} from a playbook's PLAY RECAP
    lab.forget(host=None)  close SSH masters (needed after a container was removed or restarted)

The lab is left up at the end of the session; ``playbooks/lab_down.yml`` takes it down.

A test module with clusters of its own (a --first no other file uses, docs/design.md) takes them up and
down with ``own_lab`` (inventory written by ``lab_inventory``: clusters, sizes, group and host vars):

    @pytest.fixture(scope="module")
    def lab9(tmp_path_factory):
        with own_lab(tmp_path_factory, 9, group_vars={"lab9": {"vllm_pd_kv_port": 28002}}) as lab:
            yield lab
Tests that restart or remove containers must call ``lab.forget()`` and leave the lab up again.
"""
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
import testinfra.host
from testinfra.backend.ssh import SshBackend

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
PD_GROUPS = ("vllm_pd_prefill", "vllm_pd_decode", "vllm_pd_proxy")
# the collection as ansible_collections.vllm_pd.ascend (the link scripts/lib.sh makes), for the tests that
# use its code directly, e.g. the load generator
sys.path.insert(0, str(ROOT / ".cache" / "collections"))


def pytest_configure(config):
    config.addinivalue_line("markers", "lab: needs the podman lab hosts (tests/lab/conftest.py)")


def pytest_collection_modifyitems(items):
    for item in items:
        if "lab" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.lab)


def guard(addr):
    """The HARD RULE: ADDR must route through a local podman* bridge, with no gateway."""
    r = subprocess.run([str(ROOT / "lab" / "route-guard"), addr], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip() or f"route-guard refused {addr}")


def _first_host(subnet):
    """The gateway podman (and lab/lab-hosts) give a subnet: its first host address."""
    return str(next(ipaddress.ip_network(subnet).hosts()))


class GuardedSsh(SshBackend):
    """testinfra's ssh backend with the route guard in front of every command it sends."""

    NAME = "lab-ssh"

    def run_ssh(self, command):
        guard(self.host.name)
        return super().run_ssh(command)


class Lab:
    guard = staticmethod(guard)

    def __init__(self, inventory):
        self.root = ROOT
        self.inventory = str(inventory)
        inv = json.loads(subprocess.run([str(BIN / "ansible-inventory"), "-i", self.inventory, "--list"],
                                        capture_output=True, text=True, check=True, cwd=ROOT).stdout)
        hv = inv["_meta"]["hostvars"]
        groups = {g: (inv.get(g) or {}).get("hosts", []) for g in inv if g != "_meta"}
        self.prefill, self.decode, self.proxy = (groups.get(g, []) for g in PD_GROUPS)
        self.hosts, self.clusters = {}, {}
        for name in dict.fromkeys(self.prefill + self.decode + self.proxy):
            v = hv[name]
            self.hosts[name] = {"data_ip": v["ansible_host"], "mgmt_ip": v["lab_mgmt_ip"],
                                "mgmt_gw": _first_host(v["lab_mgmt_subnet"]), "cluster": v["vllm_pd_cluster"],
                                "groups": [g for g, hs in groups.items() if name in hs]}
            self.clusters.setdefault(v["vllm_pd_cluster"], []).append(name)
        key = next(iter(hv.values()), {}).get("ansible_ssh_private_key_file", "")
        self.key = key if key and "{{" not in key else str(ROOT / ".cache" / "lab" / "id_ed25519")
        self._mux = tempfile.mkdtemp(prefix="lab-ssh-")
        self._ssh_opts = ["-i", self.key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                          "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
                          "-o", "ControlMaster=auto", "-o", f"ControlPath={self._mux}/%C",
                          "-o", "ControlPersist=120"]
        # the same options for testinfra, which passes "-F FILE" to ssh: one master per host for both
        self._ssh_config = os.path.join(self._mux, "ssh_config")
        with open(self._ssh_config, "w", encoding="utf-8") as f:
            f.write("Host *\n" + "".join(f"  {o.split('=', 1)[0]} {o.split('=', 1)[1]}\n"
                                         for o in self._ssh_opts[3::2]) + f"  IdentityFile {self.key}\n")
        self._testinfra = {}

    def ssh(self, host, cmd, check=True, timeout=120):
        ip = self.hosts[host]["data_ip"]
        guard(ip)
        return subprocess.run(["ssh", *self._ssh_opts, f"root@{ip}", cmd],
                              capture_output=True, text=True, check=check, timeout=timeout)

    def host(self, host):
        ip = self.hosts[host]["data_ip"]
        guard(ip)
        if host not in self._testinfra:
            # controlpersist=0: ControlMaster/ControlPath/ControlPersist come from the config file
            self._testinfra[host] = testinfra.host.Host(
                GuardedSsh(f"root@{ip}", ssh_config=self._ssh_config, controlpersist=0))
        return self._testinfra[host]

    def listening(self, host):
        out = set()
        for spec in self.host(host).socket.get_listening_sockets():
            if spec.startswith("tcp://"):
                addr, port = spec[len("tcp://"):].rsplit(":", 1)
                out.add((addr.strip("[]"), int(port)))
        return out

    def ports(self, host):
        return {port for _addr, port in self.listening(host)}

    def unit(self, host, name):
        props = self.host(host).service(name).systemd_properties
        return props.get("UnitFileState", ""), props.get("ActiveState", "")

    def run(self, host, cmd, check=True):
        h = self.host(host)
        return h.run_expect([0], cmd) if check else h.run(cmd)

    def owner(self, host, port):
        pids = re.findall(r"pid=(\d+)", self.run(host, f"ss -Htlnp 'sport = :{port}'", check=False).stdout)
        cgroup = self.host(host).file(f"/proc/{pids[0]}/cgroup") if pids else None
        return cgroup.content_string if cgroup is not None and cgroup.exists else ""

    def record(self, host, path="/etc/vllm-pd/stopped-services"):
        f = self.host(host).file(path)
        if not f.exists:
            return None
        return [json.loads(line) for line in f.content_string.splitlines() if line.strip()]

    def forget(self, host=None):
        for h in [host] if host else list(self.hosts):
            subprocess.run(["ssh", *self._ssh_opts, "-O", "exit", f"root@{self.hosts[h]['data_ip']}"],
                           capture_output=True, text=True, check=False)

    def copy(self, host, src, dest):
        subprocess.run(["podman", "cp", str(src), f"{host}:{dest}"], check=True, capture_output=True)

    def playbook(self, path, *args, check=True):
        r = subprocess.run([str(BIN / "ansible-playbook"), "-i", self.inventory, str(ROOT / path), *args],
                           capture_output=True, text=True, cwd=ROOT, check=False)
        if check and r.returncode != 0:
            raise AssertionError(f"{path} failed (rc {r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-2000:]}")
        return r

    def fixtures(self, host, names=(), state="present", **extra):
        ev = {"lab_fixture_hosts": host, "lab_fixtures": list(names), "lab_fixture_state": state, **extra}
        return self.playbook("lab/fixtures.yml", "-e", json.dumps(ev))

    @staticmethod
    def changed(result):
        recap = result.stdout.split("PLAY RECAP")[-1]
        return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+:.*?changed=(\d+)", recap, re.M)}

    @staticmethod
    def failures(result, limit=6000):
        """The failed tasks of a playbook's output, first failure first, then its recap: a tail of a long run loses
        the first failure (a host that failed early, and the cluster gate that stopped the others after it)."""
        run, _sep, recap = result.stdout.rpartition("PLAY RECAP")
        failed = "\n".join(t for t in re.split(r"\n(?=TASK \[)", run) if re.search(r"^(fatal|failed): ", t, re.M))
        return failed[:limit] + "\nPLAY RECAP" + recap

    def up(self):
        r = self.playbook("playbooks/lab_up.yml")
        for h in self.hosts.values():
            guard(h["data_ip"])
            guard(h["mgmt_ip"])
        return r

    def close(self):
        self.forget()
        shutil.rmtree(self._mux, ignore_errors=True)


def lab_inventory(out, first, clusters=1, prefill=None, decode=None, runtime=None, group_vars=None, host_vars=None,
                  release=None):
    """Write a lab/gen-inventory inventory to OUT: CLUSTERS clusters numbered from FIRST (hosts pd-p<c>,
    pd-d<c>), PREFILL/DECODE hosts a cluster, RUNTIME (container), RELEASE (lab_vllm_ascend_release); group_vars {cluster: {var: value}} go to
    group_vars/cluster_<cluster>.yml, host_vars {host: {var: value}} to host_vars/<host>.yml (host_vars/ is
    made even when empty: tests write there later). Returns OUT (Path)."""
    out = Path(out)
    argv = [str(ROOT / "lab" / "gen-inventory"), "--clusters", str(clusters), "--first", str(first), "--out", str(out)]
    for opt, value in (("--prefill", prefill), ("--decode", decode), ("--runtime", runtime), ("--release", release)):
        if value is not None:
            argv += [opt, str(value)]
    subprocess.run(argv, check=True)
    (out / "host_vars").mkdir(exist_ok=True)
    for where, values in [(out / "group_vars" / f"cluster_{c}.yml", v) for c, v in (group_vars or {}).items()] + [
            (out / "host_vars" / f"{h}.yml", v) for h, v in (host_vars or {}).items()]:
        where.write_text("---\n" + json.dumps(values) + "\n")
    return out


@contextmanager
def own_lab(tmp_path_factory, first, check_down=False, **inventory):
    """A test module's own clusters (lab_inventory's arguments), up: yields their Lab; at the end
    lab_down.yml of that inventory only removes its containers (check_down: its failure fails the test)."""
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: the lab needs it (apt-get install -y podman runc debootstrap)")
    lab = Lab(lab_inventory(tmp_path_factory.mktemp(f"lab{first}-"), first, **inventory))
    try:
        lab.up()
        yield lab
    finally:
        lab.close()
        lab.playbook("playbooks/lab_down.yml", check=check_down)


@pytest.fixture(scope="session")
def lab():
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: the lab needs it (apt-get install -y podman runc debootstrap)")
    lab = Lab(os.environ.get("VLLM_PD_LAB_INVENTORY") or ROOT / "inventory" / "lab")
    lab.up()
    yield lab
    lab.close()
