"""The vllm-ascend release installed on each host, read by the preflight and refused or followed (issue 30).

Clusters lab18 and lab19 of lab/gen-inventory (hosts pd-p18, pd-d18, pd-p19, pd-d19); no other test's lab is
touched. The stand-in is installed as the distributions vllm-ascend and vllm of a release (lab/install-standin,
lab_vllm_ascend_release) and behaves as that release:
- lab19 (0.23.0.post1): a D host reinstalled as 0.13.0 or as an unknown release is refused UnsupportedRelease, and as
  0.18.0 (P on 0.23.0.post1) ReleaseMismatch, before any change; an inventory release other than the installed one is
  a ReleaseMismatch naming vllm_pd_vllm_ascend_version; vllm_pd_ignore_checks makes UnsupportedRelease a warning.
- lab19 then deploys as 0.23.0.post1 (its lab NPU layer reports CANN 9.1.0, the CANN of that release).
- lab18 (0.18.0 everywhere): deploys, and the smoke request proves KV moved with 0.18's KV log line
  ("took X ms (G groups, B blocks)"), the abort variable 0.18 reads and --shutdown-timeout (0.18 has it).
Every container of both clusters is removed at the end.
"""
import json
import subprocess

import pytest

from conftest import ROOT, own_lab

pytestmark = pytest.mark.lab

P18, D18, P19, D19 = "pd-p18", "pd-d18", "pd-p19", "pd-d19"


@pytest.fixture(scope="module")
def rel(tmp_path_factory):
    with own_lab(tmp_path_factory, 18, clusters=2, group_vars={"lab18": {"lab_vllm_ascend_release": "0.18.0"}}) as lab:
        lab.playbook("playbooks/stop_pd.yml", check=False)
        yield lab


def install(host, release):
    r = subprocess.run([str(ROOT / "lab" / "install-standin"), f"{host}={release}"], capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout)


def untouched(lab, host):
    """Nothing of PD on HOST: no unit, no env file."""
    return lab.run(host, "ls /etc/systemd/system/ /etc/vllm-pd/ 2>/dev/null | grep -c '^vllm-pd-' || true").stdout.strip() == "0"


def preflight19(lab, *args):
    r = lab.playbook("playbooks/preflight.yml", "--limit", "cluster_lab19", *args, check=False)
    return r, " ".join(r.stdout.split())


def test_the_host_reads_as_the_release_it_is_installed_as(rel):
    code = "import importlib.metadata as m; print(m.version('vllm-ascend'), m.version('vllm'))"
    assert rel.run(P18, f"/usr/bin/python3 -c \"{code}\"").stdout.split() == ["0.18.0", "0.18.0"]
    assert rel.run(P19, f"/usr/bin/python3 -c \"{code}\"").stdout.split() == ["0.23.0.post1", "0.23.0"]
    # vLLM 0.18 has --shutdown-timeout, 0.13 refuses it as an unrecognized argument
    assert "--shutdown-timeout" in rel.run(P18, "/opt/vllm-lab/bin/vllm serve --help=all").stdout
    # a fresh lab NPU layer reports the CANN the installed release is built with
    info = "cat /usr/local/Ascend/ascend-toolkit/latest/*-linux/ascend_toolkit_install.info"
    assert "8.5.1" in rel.run(P18, info).stdout and "9.1.0" in rel.run(P19, info).stdout


@pytest.mark.parametrize("release, words", [
    ("0.13.0", "vllm-ascend 0.13.0 is refused: its example proxy removes a member at once"),
    ("0.99.0", "vllm-ascend 0.99.0 is not a release this collection was checked against"),
])
def test_an_unsupported_release_on_d_is_refused_before_any_change(rel, release, words):
    install(D19, release)
    try:
        r, out = preflight19(rel)
        assert r.returncode != 0, r.stdout[-3000:]
        assert "the installed vllm-ascend release is refused; nothing was changed" in out, r.stdout[-4000:]
        assert f"[UnsupportedRelease] cluster lab19, host {D19} decode (Python /usr/bin/python3): {words}" in out, \
            r.stdout[-4000:]
        assert "[ReleaseMismatch] cluster lab19: P and D must run one vllm-ascend release" in out
        assert untouched(rel, P19) and untouched(rel, D19)
    finally:
        install(D19, "0.23.0.post1")


def test_p_and_d_on_different_supported_releases_are_refused(rel):
    install(D19, "0.18.0")
    try:
        r, out = preflight19(rel)
        assert r.returncode != 0, r.stdout[-3000:]
        assert (f"[ReleaseMismatch] cluster lab19: P and D must run one vllm-ascend release (the KV connector, its log "
                f"and its port formula differ between releases), but it runs 0.18.0 on host {D19} decode; "
                f"0.23.0.post1 on host {P19} prefill") in out, r.stdout[-4000:]
        assert "[UnsupportedRelease]" not in out
        assert untouched(rel, P19) and untouched(rel, D19)
    finally:
        install(D19, "0.23.0.post1")


def test_the_inventory_release_is_compared_with_the_installed_one(rel):
    r, out = preflight19(rel, "-e", "vllm_pd_vllm_ascend_version=v0.18.0")
    assert r.returncode != 0, r.stdout[-3000:]
    assert f"[ReleaseMismatch] cluster lab19: vllm_pd_vllm_ascend_version is 0.18.0, but {P19} prefill" in out \
        or f"[ReleaseMismatch] cluster lab19: vllm_pd_vllm_ascend_version is 0.18.0, but host {D19} decode, host {P19} " \
           f"prefill runs 0.23.0.post1" in out, r.stdout[-4000:]
    assert untouched(rel, P19) and untouched(rel, D19)


def test_an_ignored_unsupported_release_only_warns(rel):
    install(P19, "0.13.0")
    install(D19, "0.13.0")
    try:
        r, out = preflight19(rel, "-e", json.dumps({"vllm_pd_ignore_checks": ["UnsupportedRelease"]}))
        assert r.returncode == 0, r.stdout[-4000:]
        assert "WARNING, ignored by vllm_pd_ignore_checks (the deploy goes on):" in out, r.stdout[-4000:]
        assert f"[UnsupportedRelease] cluster lab19, host {P19} prefill (Python /usr/bin/python3): vllm-ascend 0.13.0 " \
               f"is refused" in out, r.stdout[-4000:]
    finally:
        install(P19, "0.23.0.post1")
        install(D19, "0.23.0.post1")


def test_a_cluster_on_0_18_deploys_and_moves_kv_with_its_log_line(rel):
    r = rel.playbook("playbooks/deploy_pd.yml", "--limit", "cluster_lab18", check=False)
    try:
        assert r.returncode == 0, r.stdout[-5000:]
        assert "KV moved P -> D for" in r.stdout, r.stdout[-3000:]
        journal = rel.run(D18, "journalctl -u vllm-pd-decode.service --no-pager -o cat").stdout
        assert "groups, " in journal and " blocks). local_ip " in journal, journal[-2000:]
        env = rel.run(P18, "cat /etc/vllm-pd/prefill.env").stdout
        assert "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT=" in env and "VLLM_NIXL_ABORT_REQUEST_TIMEOUT" not in env, env
        unit = rel.run(P18, "systemctl cat vllm-pd-prefill.service").stdout
        assert "--shutdown-timeout" in unit, unit
    finally:
        rel.playbook("playbooks/stop_pd.yml", "--limit", "cluster_lab18", check=False)


def test_a_cluster_on_0_23_deploys_with_the_cann_of_its_release(rel):
    # the lab NPU layer of a fresh host reports the CANN 0.23.0.post1 is built with (9.1.0), so the CANN check that
    # follows the installed release passes, as on a real host installed for it
    cann = rel.run(P19, "cat /usr/local/Ascend/ascend-toolkit/latest/*-linux/ascend_toolkit_install.info").stdout
    assert "9.1.0" in cann, cann
    r = rel.playbook("playbooks/deploy_pd.yml", "--limit", "cluster_lab19", check=False)
    try:
        assert r.returncode == 0, r.stdout[-5000:]
        assert "KV moved P -> D for" in r.stdout, r.stdout[-3000:]
        journal = rel.run(D19, "journalctl -u vllm-pd-decode.service --no-pager -o cat").stdout
        assert " ms. local_ip " in journal and " blocks). local_ip " not in journal, journal[-2000:]
    finally:
        rel.playbook("playbooks/stop_pd.yml", "--limit", "cluster_lab19", check=False)
