"""Watching a PD deployment and a lab that survives reboots (issue 22, items 3 and 4), on two clusters:
a monitoring port inside a kv_port group is refused before any change; the deploy writes Prometheus
file_sd files that list every instance with its labels (promtool accepts them) and whose P/D targets
answer /metrics with vLLM's names; a decode host restarted with `podman restart` is deployed again
with every NPU reachable; lab/fixtures.yml state=absent clears the fixtures of every host.

Clusters lab35 and lab36 (conftest own_lab; hosts pd-p35, pd-d35, pd-p36, pd-d36), so the other lab
tests' clusters are left alone; it does not use the ``lab`` fixture. Its containers are removed at the end.
"""
import json
import shutil
import subprocess
import time
import urllib.request

import pytest
import yaml

from conftest import own_lab

pytestmark = pytest.mark.lab

P, D = "pd-p35", "pd-d35"
# what a deploy writes on a host, if anything is newer than the marker
WRITTEN = "find /etc/systemd/system /etc/vllm-pd -newer /run/observe-marker -name 'vllm-pd*' 2>/dev/null"


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    with own_lab(tmp_path_factory, 35, clusters=2) as lab:
        yield lab


def get(lab, url):
    lab.guard(url.split("//")[1].split(":")[0].strip("[]"))
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read().decode()


def test_monitoring_port_in_a_group_is_refused_before_any_change(two):
    lab = two
    for h in lab.hosts:
        lab.ssh(h, "touch /run/observe-marker")
    # the field report's Grafana, here inside the lab's prefill group 28002-28009 (kv_port 28002, tp 8)
    r = lab.playbook("playbooks/deploy_pd.yml", "-e", json.dumps({"vllm_pd_monitoring_ports": [3000, 9090, 28005]}),
                     check=False)
    assert r.returncode != 0
    for cluster, p in (("lab35", "pd-p35"), ("lab36", "pd-p36")):
        assert (f"cluster {cluster}, host {p}: monitoring port 28005 (vllm_pd_monitoring_ports) collides with the "
                "kv_port group 28002-28009 of instance prefill") in r.stdout, r.stdout[-3000:]
    assert "[MonitoringPortCollision]" in r.stdout and "Fix: run the monitoring service on a port outside it" in r.stdout
    assert set(lab.changed(r).values()) == {0}, lab.changed(r)
    for h in lab.hosts:
        assert lab.ssh(h, WRITTEN, check=False).stdout == "", h
    assert "TASK [vllm_pd.ascend.engine" not in r.stdout
    # an operator who accepts it (Grafana is elsewhere after all) names the check: a warning, the checks go on
    ev = {"vllm_pd_monitoring_ports": [28005], "vllm_pd_ignore_checks": ["MonitoringPortCollision"]}
    r = lab.playbook("playbooks/preflight.yml", "--limit", "cluster_lab35", "-e", json.dumps(ev))
    assert "WARNING (ignored by vllm_pd_ignore_checks):" in r.stdout and "monitoring port 28005" in r.stdout


def test_deploy_writes_file_sd_that_lists_every_instance_and_answers(two, tmp_path):
    lab = two
    sd = tmp_path / "file_sd"
    r = lab.playbook("playbooks/deploy_pd.yml", "-e", f"vllm_pd_prometheus_file_sd_dir={sd}")
    assert r.stdout.count("KV moved P -> D for") == 2, r.stdout[-3000:]
    jobs = {f.stem: yaml.safe_load(f.read_text()) for f in sd.glob("*.yml")}
    # vllm_pd_front (HAProxy's exporter of the proxy tier) is written too, empty: these clusters run no tier
    assert sorted(jobs) == ["vllm_pd_decode", "vllm_pd_front", "vllm_pd_prefill", "vllm_pd_proxy"]
    assert jobs["vllm_pd_front"] == []
    want = {}
    for h, v in lab.hosts.items():
        for role, port in (("prefill", 8100), ("decode", 8200), ("proxy", 8000)):
            if "vllm_pd_" + role in v["groups"]:
                want[(role, h)] = {"targets": [f"{v['data_ip']}:{port}"],
                                   "labels": {"cluster": v["cluster"], "role": role, "instance": role, "host": h}}
    got = {(e["labels"]["role"], e["labels"]["host"]): e for entries in jobs.values() for e in entries}
    assert got == want
    assert {e["labels"]["role"] for e in jobs["vllm_pd_proxy"]} == {"proxy"}
    if shutil.which("promtool"):
        config = {"scrape_configs": [{"job_name": j, "file_sd_configs": [{"files": [str(sd / f"{j}.yml")]}]}
                                     for j in jobs]}
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        check = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
                               capture_output=True, text=True, check=False)
        assert check.returncode == 0, check.stdout + check.stderr
    # what Prometheus would scrape: the engines' /metrics with vLLM's names, the proxies' /healthcheck
    for e in jobs["vllm_pd_prefill"] + jobs["vllm_pd_decode"]:
        status, text = get(lab, f"http://{e['targets'][0]}/metrics")
        assert status == 200 and "vllm:num_requests_running{" in text and "vllm:request_success_total{" in text, e
    for e in jobs["vllm_pd_proxy"]:
        assert get(lab, f"http://{e['targets'][0]}/healthcheck")[0] == 200, e
    # a re-run writes the same files: nothing changes
    again = lab.playbook("playbooks/deploy_pd.yml", "-e", f"vllm_pd_prometheus_file_sd_dir={sd}")
    assert set(lab.changed(again).values()) == {0}, lab.changed(again)


def test_deploy_after_a_restart_reaches_every_npu(two):
    lab = two
    subprocess.run(["podman", "restart", "-t", "5", D], check=True, capture_output=True)
    lab.forget(D)
    deadline = time.monotonic() + 60
    while lab.ssh(D, "true", check=False).returncode != 0:
        assert time.monotonic() < deadline, f"{D}: no SSH 60 s after the restart"
        time.sleep(1)
    # no lab_up in between: the host is as a rebooted NPU server is, and the deploy must pass the NPU checks
    r = lab.playbook("playbooks/deploy_pd.yml", "--limit", "cluster_lab35", check=False)
    assert r.returncode == 0, r.stdout[-4000:]
    assert "NpuUnreachable" not in r.stdout and r.stdout.count("KV moved P -> D for") == 1


def test_fixtures_absent_clears_every_host(two):
    lab = two
    lab.fixtures(P, ["residue"])
    lab.fixtures(D, ["conflict_process"], lab_conflict_process_port=28120)
    assert lab.ssh(P, "test -e /run/vllm-pd-lab/residue.list", check=False).returncode == 0
    assert lab.ssh(D, "test -e /run/vllm-pd-lab/conflict-process-28120.pid", check=False).returncode == 0
    # no lab_fixture_hosts: every PD host of the inventory
    r = lab.playbook("lab/fixtures.yml", "-e", "lab_fixture_state=absent")
    assert set(lab.changed(r)) == set(lab.hosts), r.stdout[-2000:]
    assert lab.ssh(P, "test -e /run/vllm-pd-lab/residue.list", check=False).returncode != 0
    assert lab.ssh(D, "ls /run/vllm-pd-lab/conflict-process-*.pid", check=False).returncode != 0
    assert 28120 not in lab.ports(D)
