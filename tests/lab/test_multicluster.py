"""Several clusters in one inventory (issue 5): a misconfigured or failing cluster stops only
itself under the parallel policy, and stops the later batches under canary; --limit works.

Uses clusters lab3 and lab4 of lab/gen-inventory (hosts pd-p3, pd-d3, pd-p4, pd-d4), so the
default lab (lab1) is left alone. Their containers are removed at the end.
"""
from pathlib import Path

import pytest

from conftest import own_lab

GOOD, BAD = "lab3", "lab4"


@pytest.fixture(scope="module")
def two(lab, tmp_path_factory):
    """A Lab over a two-cluster inventory (the same helper as the default lab's)."""
    with own_lab(tmp_path_factory, 3, clusters=2) as two:
        yield two


def active(two, host, unit):
    return two.host(host).service(unit).is_running


def write_vars(inv, cluster, text):
    (Path(inv) / "group_vars" / f"cluster_{cluster}.yml").write_text("---\n" + text)


def clear_vars(inv, cluster):
    (Path(inv) / "group_vars" / f"cluster_{cluster}.yml").unlink(missing_ok=True)


def test_a_misconfigured_cluster_fails_alone(two):
    write_vars(two.inventory, BAD, "vllm_pd_prefill_tp_size: 4\n")  # prefill tp < decode tp 8
    try:
        r = two.playbook("playbooks/deploy_pd.yml", check=False)
    finally:
        clear_vars(two.inventory, BAD)
    out = r.stdout
    assert r.returncode != 0
    assert f"cluster {BAD}: vllm_pd_prefill_tp_size=4 is smaller than vllm_pd_decode_tp_size=8" in out, out[-4000:]
    assert "KV moved P -> D for" in out and out.count("KV moved P -> D for") == 1, out[-4000:]
    assert active(two, "pd-p3", "vllm-pd-prefill")
    assert active(two, "pd-d3", "vllm-pd-decode")
    for host, unit in (("pd-p4", "vllm-pd-prefill"), ("pd-d4", "vllm-pd-decode")):
        assert not active(two, host, unit), f"{host} {unit} started in the misconfigured cluster"


def test_canary_failure_stops_the_rest_and_limit_deploys_one_cluster(two):
    two.playbook("playbooks/stop_pd.yml")
    # The canary (first cluster, lab3) fails at run time: its P port group is partly held by a
    # service the operator did not allow to stop.
    two.fixtures("pd-p3", ["conflict_service"])
    write_vars(two.inventory, GOOD, "vllm_pd_stop_services: []\n")
    try:
        r = two.playbook("playbooks/deploy_pd.yml", "-e", "vllm_pd_rollout=canary", check=False)
        assert r.returncode != 0
        assert "28005" in r.stdout and "grafana-server" in r.stdout, r.stdout[-4000:]
        assert "Not rolled out: the rollout stopped (vllm_pd_rollout=canary" in r.stdout, r.stdout[-4000:]
        for host, unit in (("pd-p4", "vllm-pd-prefill"), ("pd-d4", "vllm-pd-decode"), ("pd-p3", "vllm-pd-prefill")):
            assert not active(two, host, unit), f"{host} {unit} started after the canary failed"
        # An operator fixes or skips the broken cluster: --limit deploys just the other one.
        r = two.playbook("playbooks/deploy_pd.yml", "--limit", f"cluster_{BAD}", check=False)
        assert r.returncode == 0, r.stdout[-4000:]
        assert "KV moved P -> D for" in r.stdout
        assert active(two, "pd-d4", "vllm-pd-decode")
        assert not active(two, "pd-p3", "vllm-pd-prefill")
    finally:
        clear_vars(two.inventory, GOOD)
        two.fixtures("pd-p3", state="absent")
