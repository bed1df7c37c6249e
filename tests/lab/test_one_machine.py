"""Two inventory names for one machine (the data and the mgmt address of pd-p15) are refused by the
preflight on the hosts (same boot id and /etc/systemd/system), with nothing written (issue 13, item 5).
The cluster carries hostile but legal values (a model path with '%', '$', blanks, quotes and a
backslash; an env value that needs systemd's quoting), which the validation must let through. That
the engine then runs exactly that argv and environment is proven without a host by
tests/unit/hostile/test_inventory_hostile.py (parsed back, systemd-analyze verify); a full deploy
here takes about two minutes, too long for every run.

Cluster lab15 of lab/gen-inventory (hosts pd-p15, pd-d15), so the default lab is left alone; its
containers are removed at the end.
"""
import subprocess

import pytest

from conftest import ROOT, own_lab

pytestmark = pytest.mark.lab

P = "pd-p15"
MODEL = "/models/lab 100%Zsure $HOME ${X} \"q's\" back\\slash"
ODD = ' a "b" $c \\d `e` %f '


@pytest.fixture(scope="module")
def h15(tmp_path_factory):
    with own_lab(tmp_path_factory, 15, group_vars={"lab15": {
            "vllm_pd_model": MODEL, "vllm_pd_extra_args": ["--seed", "7"],
            "vllm_pd_engine_env": {"VLLM_LAB_STARTUP_DELAY": "1", "LAB_ODD": ODD}}}) as lab:
        yield lab


def test_two_names_for_one_machine_are_refused(h15, tmp_path):
    inv = tmp_path / "alias"
    inv.mkdir()
    src = __import__("pathlib").Path(h15.inventory)
    subprocess.run(["cp", "-r", str(src / "group_vars"), str(inv)], check=True)
    hosts = (src / "hosts.yml").read_text()
    alias = h15.hosts[P]["mgmt_ip"]
    hosts = hosts.replace("vllm_pd_decode: {hosts: {pd-d15: {}}}", "vllm_pd_decode: {hosts: {pd-d15: {}, pd-p15-again: {}}}")
    hosts = hosts.replace("        pd-d15:", f"        pd-p15-again: {{ansible_host: {alias}, lab_mgmt_ip: {alias}, "
                          f"lab_mgmt_subnet: {h15.hosts[P]['mgmt_ip'].rsplit('.', 1)[0]}.0/24}}\n        pd-d15:")
    (inv / "hosts.yml").write_text(hosts)
    h15.guard(alias)
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(inv),
                        str(ROOT / "playbooks" / "preflight.yml")], capture_output=True, text=True, cwd=ROOT,
                       check=False, timeout=300)
    assert r.returncode != 0
    assert "pd-p15 in this run is the same machine (same boot id and the same /etc/systemd/system)" in r.stdout, r.stdout[-3000:]
    assert "Fix: keep one inventory host per machine" in r.stdout
    assert "The inventory has" not in r.stdout  # the hostile but legal values passed the validation
    units = h15.host(P).file("/etc/systemd/system")
    assert units.is_directory
    assert not [n for n in units.listdir() if "vllm-pd" in n], units.listdir()  # nothing was written
