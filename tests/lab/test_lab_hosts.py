"""Fidelity checks of the lab hosts (see conftest.py for the ``lab`` fixture)."""
import pathlib
import socket
import subprocess
import time

import pytest


def names(lab):
    return sorted(lab.hosts)


def test_systemd_running(lab):
    for h in names(lab):
        r = lab.ssh(h, "systemctl is-system-running", check=False)
        assert r.stdout.strip() in ("running", "degraded"), (h, r.stdout)


def test_nics(lab):
    for h in names(lab):
        assert "dev mgmt0" in lab.ssh(h, "ip route show default").stdout
        assert lab.hosts[h]["data_ip"] + "/" in lab.ssh(h, "ip -o addr show dev data0").stdout
        assert "172.17.0.1/16" in lab.ssh(h, "ip -o addr show dev docker0").stdout


def test_autodetect_picks_mgmt(lab):
    cmd = "python3 -c 'import socket;s=socket.socket(2,2);s.connect((\"8.8.8.8\",80));print(s.getsockname()[0])'"
    for h in names(lab):
        assert lab.ssh(h, cmd).stdout.strip() == lab.hosts[h]["mgmt_ip"]


def test_peers_data_not_mgmt(lab):
    a, b = names(lab)[:2]
    probe = "python3 -c 'import socket,sys;socket.create_connection((sys.argv[1],22),timeout=2)' "
    assert lab.ssh(a, probe + lab.hosts[b]["data_ip"], check=False).returncode == 0
    assert lab.ssh(a, probe + lab.hosts[b]["mgmt_ip"], check=False).returncode != 0


def test_tmpfs(lab):
    for h in names(lab):
        out = lab.ssh(h, "findmnt -n -o FSTYPE /dev/shm; findmnt -n -o FSTYPE /tmp").stdout.split()
        assert out == ["tmpfs", "tmpfs"], (h, out)


def test_grafana_fixture(lab, tmp_path):
    h = names(lab)[0]
    root = pathlib.Path(lab.inventory).parents[1]
    pb = tmp_path / "g.yml"
    pb.write_text(f"- hosts: {h}\n  gather_facts: false\n  vars: {{lab_root: {root}/lab}}\n  tasks:\n"
                  f"    - ansible.builtin.include_tasks: {root}/lab/tasks/conflict_service.yml\n")
    r = subprocess.run([str(root / ".venv/bin/ansible-playbook"), "-i", lab.inventory, str(pb)],
                       capture_output=True, text=True, cwd=root)
    assert r.returncode == 0, r.stdout[-3000:]
    code = "python3 -c 'import urllib.request;print(urllib.request.urlopen(\"http://127.0.0.1:28005/\").status)'"
    assert lab.ssh(h, code).stdout.strip() == "200"
    lab.ssh(h, "systemctl stop grafana-server")
    assert ":28005 " not in lab.ssh(h, "ss -ltn 2>/dev/null || cat /proc/net/tcp").stdout


def test_lab_up_idempotent(lab):
    r = lab.playbook("lab_up.yml")
    assert r.returncode == 0, r.stdout[-3000:]
    assert "changed=0" in r.stdout.split("PLAY RECAP")[-1], r.stdout[-2000:]
