"""The NPU layer (issue 14) on cluster lab10 of lab/gen-inventory (hosts pd-p10, pd-d10), so other
labs are left alone; its containers and networks are removed at the end.

- fidelity, without the collection: the stand-in started by hand refuses to move KV over a broken NPU
  (the field report's log lines), and moves it when the layer is healthy;
- each NPU fixture, on a given host and NPU index, stops the preflight with its named finding (the
  preflight playbook runs the same phase 1 as deploy_pd.yml); one deploy shows it stops before any
  engine starts, vllm_pd_ignore_checks lets it go on with a warning, the doctor names the fault on the
  running deployment, and without the fixture the deploy goes through.
"""
import json
import re

import pytest

from conftest import own_lab
from test_fidelity import D_API, P_API, Units, complete, proxy, serve

P, D = "pd-p10", "pd-d10"
pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def npu(tmp_path_factory):
    with own_lab(tmp_path_factory, 10) as lab:
        lab.fixtures(f"{P}:{D}", state="absent")
        yield lab
        lab.playbook("playbooks/stop_pd.yml", check=False)


@pytest.fixture
def units(npu):
    u = Units(npu)
    yield u
    u.stop_all()


def pd_serve(npu, units):
    ph, dh = npu.hosts[P], npu.hosts[D]
    serve(units, P, "lab-npu-p", "kv_producer", P_API, host_ip=ph["data_ip"], listen_ip=ph["data_ip"])
    serve(units, D, "lab-npu-d", "kv_consumer", D_API, host_ip=dh["data_ip"], listen_ip=dh["data_ip"])
    units.wait_log(P, "lab-npu-p", r"Application startup complete")
    units.wait_log(D, "lab-npu-d", r"Application startup complete")
    proxy(units, P, ph["data_ip"], ph["data_ip"], dh["data_ip"])
    return complete(npu, ph["data_ip"])


@pytest.mark.parametrize("fixture, host, line", [
    ("hccn_conf_mismatch", D, r"\[RanktablCheck\] 'device ip' is not set correctly"),
    ("npu_link_down", P, r"HcclCommPrepare fail, ret 0x9: remote NPU 2: link status DOWN"),
])
def test_fidelity_broken_npu_moves_no_kv(npu, units, fixture, host, line):
    npu.fixtures(host, [fixture], lab_npu_index=2)
    try:
        code, body = pd_serve(npu, units)
        assert '"text"' not in body, (code, body)
        dlog = units.wait_log(D, "lab-npu-d", r"Failed to transfer KV cache for request")
        assert re.search(line, dlog), dlog
        assert "Mooncake transfer failed for request" in dlog and "ret=-1" in dlog, dlog
        # NPU 2's rank moved nothing (each rank has its own transport, as on NPUs); the request failed
        assert "local_device_id 2 " not in dlog, dlog
        assert len(re.findall(r"KV cache transfer for request", dlog)) < 8, dlog
    finally:
        npu.fixtures(host, state="absent")


def test_fidelity_healthy_npu_moves_kv_and_npu_smi_lists_the_engine(npu, units):
    code, body = pd_serve(npu, units)
    assert code == "200", body
    dlog = units.wait_log(D, "lab-npu-d", r"KV cache transfer for request .* took", count=8)
    assert "HcclCommPrepare" not in dlog and "RanktablCheck" not in dlog
    pid = npu.host(P).service("lab-npu-p").systemd_properties["MainPID"]
    assert pid != "0" and npu.host(P).process.filter(pid=int(pid)), pid
    assert re.search(rf"\|\s+\d+\s+0\s+\|\s+{pid}\s+\|", npu.run(P, "npu-smi info").stdout)


def preflight(npu, *extra):
    return npu.playbook("playbooks/preflight.yml", *extra, check=False)


# fixture, host, NPU index, the finding's name and what it must say
CASES = [
    ("npu_link_down", D, 5, "NpuLinkDown", "host pd-d10, NPU 5: the NPU NIC link is down"),
    ("hccn_conf_mismatch", P, 3, "HccnConfMismatch", "host pd-p10, NPU 3: the NPU IP differs from /etc/hccn.conf"),
    ("tls_mismatch", D, 7, "TlsMismatch", "host pd-d10, NPU 7: TLS differs across the cluster"),
    ("npu_busy", P, 6, "NpuBusy", "host pd-p10, NPU 6: another process uses the NPU"),
    ("npu_unhealthy", D, 1, "NpuUnhealthy", "host pd-d10, NPU 1: the NPU is not healthy: engines fail late (observed Health Alarm"),
    ("driver_version", P, 0, "VersionMismatch", "host pd-p10: driver versions differ across the cluster (observed driver 24.1.0"),
]


@pytest.mark.parametrize("fixture, host, index, check, says", CASES, ids=[c[0] for c in CASES])
def test_fixture_stops_the_preflight_with_its_finding(npu, fixture, host, index, check, says):
    npu.fixtures(host, [fixture], lab_npu_index=index)
    try:
        r = preflight(npu)
        assert r.returncode != 0, r.stdout[-3000:]
        assert f"{host}: the NPU layer is not ready ({check}" in r.stdout or f"({check})" in r.stdout, r.stdout[-4000:]
        assert says in r.stdout, r.stdout[-4000:]
        assert "Fix:" in r.stdout
    finally:
        npu.fixtures(host, state="absent")


def active_units(npu, host):
    """The active vllm-pd-* units on HOST (a listing: testinfra reads one named unit at a time)."""
    return npu.run(host, "systemctl list-units --plain --no-legend --state=active 'vllm-pd-*'").stdout


def test_deploy_stops_before_engines_ignore_warns_doctor_names_it_removal_passes(npu, tmp_path):
    # npu_busy: a foreign process on an NPU of D; the deployment can still move KV (the stand-in's
    # transfers only fail over a broken NPU), so the ignored finding lets it run
    npu.playbook("playbooks/stop_pd.yml", check=False)
    npu.fixtures(D, ["npu_busy"], lab_npu_index=4)
    try:
        r = npu.playbook("playbooks/deploy_pd.yml", check=False)
        assert r.returncode != 0 and "NpuBusy" in r.stdout, r.stdout[-3000:]
        assert "vllm-pd-" not in active_units(npu, P) + active_units(npu, D)
        # accepted: a warning, and the deployment runs
        r = npu.playbook("playbooks/deploy_pd.yml", "-e", json.dumps({"vllm_pd_ignore_checks": ["NpuBusy"]}),
                         check=False)
        assert r.returncode == 0, r.stdout[-4000:]
        assert "WARNING NpuBusy (ignored by vllm_pd_ignore_checks): host pd-d10, NPU 4" in r.stdout
        assert "vllm-pd-decode.service" in active_units(npu, D)
        assert npu.unit(D, "vllm-pd-decode.service") == ("enabled", "active")
        # the engines' own processes on their NPUs are not foreign: only the fixture's pid is named
        assert re.search(r"\|\s+\d+\s+0\s+\|\s+\d+\s+\|", npu.run(D, "npu-smi info").stdout)
        # the doctor on the running deployment: the NPU fault is the root cause
        report = tmp_path / "doctor.html"
        r = npu.playbook("playbooks/doctor.yml", "-e", f"vllm_pd_doctor_report={report}", check=False)
        assert r.returncode != 0, r.stdout[-3000:]
        assert re.search(r"root cause: step 2 NpuBusy on pd-d10", r.stdout), r.stdout[-4000:]
        assert "NpuBusy" in report.read_text()
    finally:
        npu.fixtures(D, state="absent")
    r = npu.playbook("playbooks/deploy_pd.yml", check=False)
    assert r.returncode == 0, r.stdout[-4000:]


def test_unknown_ignore_name_is_an_error_listing_valid_names(npu):
    r = preflight(npu, "-e", json.dumps({"vllm_pd_ignore_checks": ["NpuBussy"]}))
    assert r.returncode != 0
    assert "vllm_pd_ignore_checks names NpuBussy" in r.stdout and "NpuBusy" in r.stdout, r.stdout[-3000:]
