"""Allowed holders stay off (issue 13 item 2): a unit the preflight stops because it is in
vllm_pd_stop_services is also disabled, recorded with its state before, and
`stop_pd.yml -e vllm_pd_restore_services=true` puts back exactly that state.

Cluster lab14 of lab/gen-inventory (hosts pd-p14, pd-d14), so the default lab is left alone. The conflicting
service is lab/fixtures.yml conflict_service: a real grafana-server.service on P holding port 28005 of the
group; a socket unit systemd itself listens on is the second holder. Its containers are removed at the end.
The container holder (restart policy) is test_holders_off_container.py.
"""
import time

import pytest

from conftest import own_lab

pytestmark = pytest.mark.lab

P, D = "pd-p14", "pd-d14"
RECORD = "/etc/vllm-pd/stopped-services"


@pytest.fixture(scope="module")
def lab14(tmp_path_factory):
    with own_lab(tmp_path_factory, 14, group_vars={"lab14": {"vllm_pd_stop_services": ["grafana-server.service"]}}) as lab:
        yield lab


def unit(lab, name, host=P):
    """(UnitFileState, ActiveState) of a unit on HOST (testinfra)."""
    return lab.unit(host, name)


def record(lab):
    return lab.record(P, RECORD)


def owner(lab, port, within=90):
    """The cgroup of the process that listens on PORT on P, waiting up to WITHIN seconds for one."""
    deadline = time.time() + within
    while port not in lab.ports(P) and time.time() < deadline:
        time.sleep(0.5)
    return lab.owner(P, port)


def deploy(lab):
    r = lab.playbook("playbooks/deploy_pd.yml", check=False)
    assert r.returncode == 0, r.stdout[-5000:]
    return r


def restore(lab):
    lab.playbook("playbooks/stop_pd.yml", "-e", "vllm_pd_restore_services=true")


def test_enabled_holder_is_stopped_disabled_and_restored_as_before(lab14):
    lab14.fixtures(P, ["conflict_service"])
    assert unit(lab14, "grafana-server.service") == ("enabled", "active")
    deploy(lab14)
    # stopped AND disabled: a reboot of P would not bring it back onto the group
    assert unit(lab14, "grafana-server.service") == ("disabled", "inactive")
    rec = record(lab14)
    assert rec and rec[0]["name"] == "grafana-server.service" and rec[0]["enabled"] == "enabled"
    assert rec[0]["active"] is True and rec[0]["disable"] is True
    # a later start of the P engine is not disturbed (the holder stays off, the engine owns the group)
    lab14.run(P, "systemctl restart vllm-pd-prefill.service")
    cgroup = owner(lab14, 28005)
    assert "vllm-pd-prefill.service" in cgroup, cgroup
    assert unit(lab14, "vllm-pd-prefill.service")[1] == "active"
    assert unit(lab14, "grafana-server.service") == ("disabled", "inactive")
    restore(lab14)
    assert unit(lab14, "grafana-server.service") == ("enabled", "active")
    assert record(lab14) is None


SOCKET_UNITS = {
    # systemd itself listens (Accept=yes: PID 1 holds the listening socket, one service per connection)
    "/etc/systemd/system/pdlab-echo.socket": "[Socket]\nListenStream=28006\nAccept=yes\n"
                                             "[Install]\nWantedBy=sockets.target\n",
    "/etc/systemd/system/pdlab-echo@.service": "[Service]\nExecStart=/bin/cat\nStandardInput=socket\n",
}


def test_socket_held_by_systemd_is_stopped_and_disabled_and_restored(lab14):
    lab14.fixtures(P, state="absent")
    for path, text in SOCKET_UNITS.items():
        lab14.run(P, f"printf '{text}' > {path}")
    lab14.run(P, "systemctl daemon-reload && systemctl enable --now pdlab-echo.socket")
    inv = lab14.inventory
    vars_file = f"{inv}/group_vars/cluster_lab14.yml"
    with open(vars_file, "w") as f:
        f.write("---\nvllm_pd_stop_services: [pdlab-echo.socket]\n")
    try:
        assert unit(lab14, "pdlab-echo.socket") == ("enabled", "active")
        assert 28006 in lab14.ports(P)
        deploy(lab14)
        # stopped and disabled, else systemd would listen again at boot (sockets.target)
        assert unit(lab14, "pdlab-echo.socket") == ("disabled", "inactive")
        cgroup = owner(lab14, 28006)  # the engine took the port systemd listened on
        assert "vllm-pd-prefill.service" in cgroup, cgroup
        rec = record(lab14)
        assert rec and rec[0]["name"] == "pdlab-echo.socket" and rec[0]["enabled"] == "enabled", rec
        restore(lab14)
        assert unit(lab14, "pdlab-echo.socket") == ("enabled", "active")
        assert record(lab14) is None
    finally:
        with open(vars_file, "w") as f:
            f.write("---\nvllm_pd_stop_services: [grafana-server.service]\n")
        lab14.run(P, "systemctl disable --now pdlab-echo.socket; rm -f " + " ".join(SOCKET_UNITS)
                  + "; systemctl daemon-reload", check=False)


def test_disabled_but_running_holder_comes_back_running_and_still_disabled(lab14):
    lab14.fixtures(P, ["conflict_service"])
    lab14.run(P, "systemctl disable grafana-server.service && systemctl start grafana-server.service")
    assert unit(lab14, "grafana-server.service") == ("disabled", "active")
    deploy(lab14)
    assert unit(lab14, "grafana-server.service") == ("disabled", "inactive")
    rec = record(lab14)
    assert rec and rec[0]["enabled"] == "disabled" and rec[0]["disable"] is False
    restore(lab14)
    assert unit(lab14, "grafana-server.service") == ("disabled", "active")
    lab14.fixtures(P, state="absent")
