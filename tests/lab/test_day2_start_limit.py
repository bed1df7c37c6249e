"""A deploy after many starts within StartLimitIntervalSec still starts every unit (issue 21, step 1).

systemd counts every start of a unit, those of earlier deploys and an operator's restarts too, against
StartLimitBurst (5) within StartLimitIntervalSec (600 s): without reset-failed before the start, the
6th start within 10 minutes fails with "start of the service was attempted too often".

Cluster lab41 of lab/gen-inventory (pd-p41, pd-d41; YOUR RANGE 40-49 of issue 21), its own
inventory; its containers are removed at the end.
"""
import pytest

from conftest import own_lab

pytestmark = pytest.mark.lab

P, D = "pd-p41", "pd-d41"
UNITS = ((P, "vllm-pd-prefill.service"), (D, "vllm-pd-decode.service"), (P, "vllm-pd-proxy.service"))


@pytest.fixture(scope="module")
def lab41(tmp_path_factory):
    with own_lab(tmp_path_factory, 41) as lab:
        yield lab


def test_deploy_after_start_limit_starts_every_unit(lab41):
    lab = lab41
    lab.playbook("playbooks/deploy_pd.yml")
    # the deploy's start was the 1st; 4 restarts make 5 within the interval, then the units stop:
    # a 6th start without reset-failed is refused by systemd (start-limit-hit)
    for host, unit in UNITS:
        lab.run(host, f"for i in 1 2 3 4; do systemctl restart {unit}; done; systemctl stop {unit}")
        starts = lab.run(host, f"journalctl -u {unit} -o cat --no-pager | grep -c '^Started ' || true").stdout
        assert int(starts.strip() or 0) >= 5, (host, unit, starts)
    r = lab.playbook("playbooks/deploy_pd.yml", check=False)
    assert r.returncode == 0, r.stdout[-4000:]
    assert "attempted too often" not in r.stdout
    assert "KV moved P -> D for" in r.stdout
    for host, unit in UNITS:
        assert lab.unit(host, unit) == ("enabled", "active"), (host, unit)
    r = lab.playbook("playbooks/deploy_pd.yml")
    assert set(lab.changed(r).values()) == {0}, lab.changed(r)
