"""The cheaper rollout's mechanics (issue 16) on two clusters: the start guard, the env file and the
unit written by one file_set call; a re-run changes nothing; a changed env file restarts that
engine only; stop_pd.yml stops everything.

Clusters lab16 and lab17 of lab/gen-inventory (hosts pd-p16, pd-d16, pd-p17, pd-d17), so the lab
tests' clusters are left alone; it does not use the ``lab`` fixture (that brings up inventory/lab).
Its containers are removed at the end.
"""

import pytest

from conftest import own_lab

pytestmark = pytest.mark.lab

P, D, P2 = "pd-p16", "pd-d16", "pd-p17"


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    with own_lab(tmp_path_factory, 16, clusters=2) as lab:
        yield lab


def main_pid(lab, host, unit):
    return lab.host(host).service(unit).systemd_properties["MainPID"]


def test_deploy_rerun_restart_on_change_and_stop(two):
    lab = two
    r = lab.playbook("playbooks/deploy_pd.yml")
    assert r.stdout.count("KV moved P -> D for") == 2, r.stdout[-3000:]
    for host, name in ((P, "prefill"), (D, "decode")):
        env = lab.host(host).file(f"/etc/vllm-pd/{name}.env")
        assert env.mode == 0o600 and env.user == "root" and env.group == "root"
        assert f"VLLM_HOST_IP={lab.hosts[host]['data_ip']}" in env.content_string
        unit = lab.host(host).file(f"/etc/systemd/system/vllm-pd-{name}.service")
        assert unit.mode == 0o644 and "start-guard" in unit.content_string
        assert lab.host(host).file(f"/etc/vllm-pd/{name}.guard.json").mode == 0o644
        assert lab.unit(host, f"vllm-pd-{name}.service") == ("enabled", "active")
    assert lab.host(P).file("/etc/systemd/system/vllm-pd-proxy.service").exists
    # secrets stay out of the output: no env file line is printed
    assert "VLLM_HOST_IP=" not in r.stdout

    engines = ((P, "vllm-pd-prefill.service"), (D, "vllm-pd-decode.service"), (P2, "vllm-pd-prefill.service"))
    before = {h: main_pid(lab, h, u) for h, u in engines}
    r = lab.playbook("playbooks/deploy_pd.yml")
    assert set(lab.changed(r).values()) == {0}, lab.changed(r)
    assert {h: main_pid(lab, h, u) for h, u in engines} == before

    # an edited env file is written back and restarts that engine only
    lab.ssh(P, "echo EXTRA=1 >> /etc/vllm-pd/prefill.env")
    r = lab.playbook("playbooks/deploy_pd.yml")
    assert lab.changed(r)[P] >= 2 and lab.changed(r)[D] == 0 and lab.changed(r)[P2] == 0, lab.changed(r)
    assert "EXTRA=1" not in lab.host(P).file("/etc/vllm-pd/prefill.env").content_string
    assert main_pid(lab, P, "vllm-pd-prefill.service") != before[P]
    assert main_pid(lab, D, "vllm-pd-decode.service") == before[D]
    assert main_pid(lab, P2, "vllm-pd-prefill.service") == before[P2]

    lab.playbook("playbooks/stop_pd.yml")
    for host in (P, D, P2):
        for unit in ("vllm-pd-prefill.service", "vllm-pd-decode.service", "vllm-pd-proxy.service"):
            state = lab.unit(host, unit)[1]
            assert state in ("inactive", ""), (host, unit, state)
