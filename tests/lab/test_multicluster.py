"""Several clusters in one inventory (issue 5): a misconfigured or failing cluster stops only
itself under the parallel policy, and stops the later batches under canary; --limit works.

Uses clusters lab3 and lab4 of lab/gen-inventory (hosts pd-p3, pd-d3, pd-p4, pd-d4), so the
default lab (lab1) is left alone. Their containers are removed at the end.
"""
import json
import subprocess

import pytest

from conftest import BIN, ROOT, guard

GOOD, BAD = "lab3", "lab4"


def run(inv, playbook, *args):
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inv), str(ROOT / playbook), *args],
                          capture_output=True, text=True, cwd=ROOT, check=False)


def ssh(key, ip, cmd):
    guard(ip)
    return subprocess.run(["ssh", "-i", key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                           "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", f"root@{ip}", cmd],
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def two(lab, tmp_path_factory):
    inv = tmp_path_factory.mktemp("two-clusters")
    subprocess.run([str(ROOT / "lab" / "gen-inventory"), "--clusters", "2", "--first", "3", "--out", str(inv)],
                   check=True)
    hosts = json.loads(subprocess.run([str(BIN / "ansible-inventory"), "-i", str(inv), "--list"], check=True,
                                      capture_output=True, text=True, cwd=ROOT).stdout)["_meta"]["hostvars"]
    up = run(inv, "playbooks/lab_up.yml")
    assert up.returncode == 0, up.stdout[-3000:]
    for v in hosts.values():
        guard(v["ansible_host"])
    yield inv, {h: v["ansible_host"] for h, v in hosts.items()}
    run(inv, "playbooks/lab_down.yml")


def active(two, lab, host, unit):
    return ssh(lab.key, two[1][host], f"systemctl is-active {unit}").stdout.strip()


def write_vars(inv, cluster, text):
    (inv / "group_vars" / f"cluster_{cluster}.yml").write_text("---\n" + text)


def clear_vars(inv, cluster):
    (inv / "group_vars" / f"cluster_{cluster}.yml").unlink(missing_ok=True)


def test_a_misconfigured_cluster_fails_alone(lab, two):
    inv = two[0]
    write_vars(inv, BAD, "vllm_pd_prefill_tp_size: 4\n")  # prefill tp < decode tp 8
    try:
        r = run(inv, "playbooks/deploy_pd.yml")
    finally:
        clear_vars(inv, BAD)
    out = r.stdout
    assert r.returncode != 0
    assert f"cluster {BAD}: vllm_pd_prefill_tp_size=4 is smaller than vllm_pd_decode_tp_size=8" in out, out[-4000:]
    assert "KV moved P -> D for" in out and out.count("KV moved P -> D for") == 1, out[-4000:]
    assert active(two, lab, "pd-p3", "vllm-pd-prefill") == "active"
    assert active(two, lab, "pd-d3", "vllm-pd-decode") == "active"
    for host, unit in (("pd-p4", "vllm-pd-prefill"), ("pd-d4", "vllm-pd-decode")):
        assert active(two, lab, host, unit) != "active", f"{host} {unit} started in the misconfigured cluster"


def test_canary_failure_stops_the_rest_and_limit_deploys_one_cluster(lab, two):
    inv, ips = two
    assert run(inv, "playbooks/stop_pd.yml").returncode == 0
    # The canary (first cluster, lab3) fails at run time: its P port group is partly held by a
    # service the operator did not allow to stop.
    f = run(inv, "lab/fixtures.yml", "-e", json.dumps({"lab_fixture_hosts": "pd-p3", "lab_fixtures": ["conflict_service"]}))
    assert f.returncode == 0, f.stdout[-2000:]
    write_vars(inv, GOOD, "vllm_pd_stop_services: []\n")
    try:
        r = run(inv, "playbooks/deploy_pd.yml", "-e", "vllm_pd_rollout=canary")
        assert r.returncode != 0
        assert "28005" in r.stdout and "grafana-server" in r.stdout, r.stdout[-4000:]
        assert "Not rolled out: the rollout stopped (vllm_pd_rollout=canary" in r.stdout, r.stdout[-4000:]
        for host, unit in (("pd-p4", "vllm-pd-prefill"), ("pd-d4", "vllm-pd-decode"), ("pd-p3", "vllm-pd-prefill")):
            assert active(two, lab, host, unit) != "active", f"{host} {unit} started after the canary failed"
        # An operator fixes or skips the broken cluster: --limit deploys just the other one.
        r = run(inv, "playbooks/deploy_pd.yml", "--limit", f"cluster_{BAD}")
        assert r.returncode == 0, r.stdout[-4000:]
        assert "KV moved P -> D for" in r.stdout
        assert active(two, lab, "pd-d4", "vllm-pd-decode") == "active"
        assert active(two, lab, "pd-p3", "vllm-pd-prefill") != "active"
    finally:
        clear_vars(inv, GOOD)
        run(inv, "lab/fixtures.yml", "-e", json.dumps({"lab_fixture_hosts": "pd-p3", "lab_fixture_state": "absent"}))
