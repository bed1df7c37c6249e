"""testinfra hosts for molecule's verify (molecule/shared/verify.yml runs this directory).

verify.yml passes what Ansible resolved for each PD host as JSON in MOLECULE_PD_HOSTS:
{name: {address, key, groups, cluster, kv_port, tp, dp, expect}}. Every host is reached over
SSH to its inventory address with tests/lab/conftest.py's GuardedSsh backend: lab/route-guard
passes before every command (a podman bridge, no gateway), as in the lab tests.
"""
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import testinfra.host

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("lab_conftest", ROOT / "tests" / "lab" / "conftest.py")
lab_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lab_conftest)

HOSTS = json.loads(os.environ.get("MOLECULE_PD_HOSTS") or "{}")


def pytest_generate_tests(metafunc):
    """Parametrize NAME by the PD hosts of a group: tests take prefill_name, decode_name or pd_name."""
    groups = {"prefill_name": ("vllm_pd_prefill",), "decode_name": ("vllm_pd_decode",),
              "pd_name": ("vllm_pd_prefill", "vllm_pd_decode")}
    for arg, want in groups.items():
        if arg in metafunc.fixturenames:
            metafunc.parametrize(arg, [n for n, v in HOSTS.items() if set(want) & set(v["groups"])])


@pytest.fixture(scope="session")
def pd():
    """pd.host(name) -> testinfra Host (guarded SSH, one master per host); pd.vars[name] -> the JSON entry."""
    if not HOSTS:
        pytest.fail("MOLECULE_PD_HOSTS is empty: run these tests through molecule/shared/verify.yml")
    mux = tempfile.mkdtemp(prefix="molecule-ssh-")
    config = os.path.join(mux, "ssh_config")
    with open(config, "w", encoding="utf-8") as f:
        f.write(f"Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  BatchMode yes\n"
                f"  LogLevel ERROR\n  ControlMaster auto\n  ControlPath {mux}/%C\n  ControlPersist 60\n")

    class Pd:
        vars = HOSTS
        _hosts = {}

        def host(self, name):
            v = HOSTS[name]
            lab_conftest.guard(v["address"])
            if name not in self._hosts:
                self._hosts[name] = testinfra.host.Host(lab_conftest.GuardedSsh(
                    f"root@{v['address']}", ssh_config=config, ssh_identity_file=v["key"], controlpersist=0))
            return self._hosts[name]

    yield Pd()
    for v in HOSTS.values():
        subprocess.run(["ssh", "-F", config, "-O", "exit", f"root@{v['address']}"], capture_output=True, check=False)
    shutil.rmtree(mux, ignore_errors=True)
