"""The preflight names the field report's two faults first, before its other checks and before any change
(issue 22, "faster answers"): a busy port of P's kv_port group, and a VLLM_HOST_IP that D cannot reach. The
addresses come from the module run that reads the machine (pd_host_read), not from fact gathering.
How long the answers take is measured by tests/perf/bench_preflight_answer.py; this file checks what makes
them fast (which tasks run before the answer) and that the address checks stay whole.

Cluster lab43 of lab/gen-inventory (hosts pd-p43, pd-d43), so other clusters are left alone; its containers
are removed at the end.
"""
import re
from pathlib import Path

import pytest
import yaml

from conftest import own_lab

pytestmark = pytest.mark.lab

C, P, D = "cluster_lab43", "pd-p43", "pd-d43"
# tasks of the preflight that used to run before the answers and now come after them
LATER = ("TASK [vllm_pd.ascend.preflight : Check that P and D of this cluster fit together",
         "TASK [vllm_pd.ascend.preflight : Check the API and proxy ports are free",
         "TASK [vllm_pd.ascend.preflight : Check the NPU layer of this host's instances")


@pytest.fixture(scope="module")
def l43(tmp_path_factory):
    with own_lab(tmp_path_factory, 43) as lab:
        lab.playbook("playbooks/stop_pd.yml")
        yield lab


def answered_first(lab, r, answer):
    """The answer is in the output before every task of LATER, no fact gathering ran, nothing changed."""
    out = r.stdout
    assert answer in out, out[-4000:]
    at = out.index(answer)
    for task in LATER:
        assert task in out and at < out.index(task), (task, out[-4000:])
    assert "Gather the network facts" not in out
    assert set(lab.changed(r).values()) == {0}, out[-2000:]


def no_units(lab):
    for h in (P, D):
        units = lab.host(h).file("/etc/systemd/system")
        assert not [n for n in units.listdir() if n.startswith("vllm-pd")], (h, units.listdir())


def test_a_busy_group_port_is_named_first(l43):
    pd = yaml.safe_load((Path(l43.inventory) / "group_vars" / "all" / "pd.yml").read_text())
    port = int(pd["vllm_pd_kv_port"]) + 3     # inside the group, not its first port
    l43.fixtures(P, ["conflict_process"], lab_conflict_process_port=port)
    try:
        r = l43.playbook("playbooks/deploy_pd.yml", "--limit", C, check=False)
    finally:
        l43.fixtures(P, state="absent")
    assert r.returncode != 0
    m = re.search(r"\[PortBusy\] port\(s\) %d busy: 0\.0\.0\.0:%d held by pid (\d+) \(python3\)" % (port, port), r.stdout)
    assert m, r.stdout[-4000:]
    answered_first(l43, r, m.group(0))
    no_units(l43)


def test_an_address_d_cannot_reach_is_named_first(l43, tmp_path):
    data, mgmt = l43.hosts[D]["data_ip"], l43.hosts[P]["mgmt_ip"]
    (Path(l43.inventory) / "host_vars" / f"{P}.yml").write_text(f"---\nvllm_pd_host_ip: {mgmt}\n")
    try:
        r = l43.playbook("playbooks/deploy_pd.yml", "--limit", C, check=False)
    finally:
        (Path(l43.inventory) / "host_vars" / f"{P}.yml").unlink()
    assert r.returncode != 0
    answer = f"decode host {D}, address {data} (on data0), cannot reach prefill host {P} at {mgmt} (on mgmt0)"
    answered_first(l43, r, answer)
    no_units(l43)


def test_addresses_read_with_the_machine_resolve_a_nic_and_name_a_missing_one(l43):
    (Path(l43.inventory) / "group_vars" / f"{C}.yml").write_text('---\nvllm_pd_network: ""\nvllm_pd_interface: data0\n')
    (Path(l43.inventory) / "host_vars" / f"{P}.yml").write_text("---\nvllm_pd_interface: nosuch0\n")
    try:
        r = l43.playbook("playbooks/preflight.yml", "--limit", C, "-v", check=False)
    finally:
        (Path(l43.inventory) / "group_vars" / f"{C}.yml").unlink()
        (Path(l43.inventory) / "host_vars" / f"{P}.yml").unlink()
    assert r.returncode != 0
    # every NIC of the host, with its addresses: data0, mgmt0, docker0 172.17.0.1, the NPU NIC, lo
    p = l43.hosts[P]
    m = re.search(r"vllm_pd_interface=nosuch0 does not exist on host %s \(it has: ([^)]*)\)" % P, r.stdout)
    assert m, r.stdout[-4000:]
    nics = dict(item.split("=", 1) for item in m.group(1).split("; "))
    assert nics["data0"] == p["data_ip"] and nics["mgmt0"] == p["mgmt_ip"] and nics["docker0"] == "172.17.0.1"
    assert nics["lo"].startswith("127.0.0.1") and len(nics) == 5
    # D resolved its address from vllm_pd_interface, through the same read
    # (the facts the preflight sets in the same task are printed first: indented lines, blank ones of hccn.conf)
    assert re.search(r"ok: \[%s\] => \n\s+ansible_facts:\n(?:[ \t]+\S.*\n|\n)*?[ \t]+vllm_pd_address:\n\s+address: %s\n\s+interface: data0\n"
                     r"\s+source: interface\n" % (D, re.escape(l43.hosts[D]["data_ip"])), r.stdout), r.stdout[-4000:]


def test_a_proxy_python_that_cannot_run_the_proxy_is_refused_in_the_host_read(l43):
    """proxy_python is asked in the same module run that reads the host (pd_host_read): an import the proxy script
    needs and that interpreter lacks is named, and nothing changes."""
    l43.run(P, "printf 'import json\\nimport no_such_module_of_the_lab\\n' > /root/lab-proxy.py")
    (Path(l43.inventory) / "host_vars" / f"{P}.yml").write_text(
        "---\nproxy_script: /root/lab-proxy.py\nproxy_python: /usr/bin/python3\n")
    try:
        r = l43.playbook("playbooks/preflight.yml", "--limit", C, check=False)
    finally:
        (Path(l43.inventory) / "host_vars" / f"{P}.yml").unlink()
        l43.run(P, "rm -f /root/lab-proxy.py")
    assert r.returncode != 0
    text = " ".join(r.stdout.split())
    assert re.search(r"ProxyPythonUnfit: cluster lab43, host %s: proxy_python=/usr/bin/python3 cannot run "
                     r"proxy_script=/root/lab-proxy.py( of vllm-ascend \S+)?: it cannot import "
                     r"no_such_module_of_the_lab\. Nothing was changed\." % P, text), r.stdout[-4000:]
    assert "Read whether proxy_python can run the proxy" not in r.stdout   # no task of its own
    assert set(l43.changed(r).values()) == {0}
    no_units(l43)
