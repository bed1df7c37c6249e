"""The preflight's whole-inventory validation (filter pd_inventory_errors over module_utils/inventory/inventory_rules),
run by ansible-playbook (render.yml) on the controller over an inventory of several clusters, each with
one fault, and one healthy external-DP cluster that must have no error. No host is contacted."""
import json
import os
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def cluster(name, prefill, decode=None, **cvars):
    """prefill: {host: hostvars}; one decode host d-NAME unless given."""
    decode = decode if decode is not None else {"d-" + name: {}}
    hosts = dict(prefill, **decode)
    base = {"vllm_pd_cluster": name, "vllm_pd_network": "10.0.0.0/24", "vllm_pd_model": "m", "vllm_pd_kv_port": 30000,
            "vllm_pd_prefill_tp_size": 2, "vllm_pd_decode_tp_size": 1, "vllm_pd_npu_count": 8}
    base.update(cvars)
    return name, prefill, decode, {"hosts": hosts, "vars": base}


CLUSTERS = [
    # healthy: ranks 0-3 over two P hosts (two instances each), D with internal DP
    cluster("good", {"p-good-1": {"vllm_pd_prefill_dp_ranks": [0, 1]}, "p-good-2": {"vllm_pd_prefill_dp_ranks": [3, 2]}},
            vllm_pd_prefill_dp_size=4),
    cluster("gap", {"p-gap-1": {"vllm_pd_prefill_dp_ranks": [0]}, "p-gap-2": {"vllm_pd_prefill_dp_ranks": [2]}},
            vllm_pd_prefill_dp_size=4),
    cluster("twice", {"p-twice-1": {"vllm_pd_prefill_dp_ranks": [0, 1]}, "p-twice-2": {"vllm_pd_prefill_dp_ranks": [1]}},
            vllm_pd_prefill_dp_size=2),
    cluster("mixed", {"p-mixed-1": {"vllm_pd_prefill_dp_ranks": [0]}, "p-mixed-2": {}}, vllm_pd_prefill_dp_size=2),
    cluster("outside", {"p-outside-1": {"vllm_pd_prefill_dp_ranks": [0, 5]}}, vllm_pd_prefill_dp_size=2),
    cluster("notalist", {"p-notalist-1": {"vllm_pd_prefill_dp_ranks": "0,1"}}, vllm_pd_prefill_dp_size=2),
    cluster("apiport", {"p-apiport-1": {"vllm_pd_prefill_dp_ranks": [0, 1], "vllm_pd_proxy_port": 8101}},
            vllm_pd_prefill_dp_size=2),
    cluster("ingroup", {"p-ingroup-1": {"vllm_pd_prefill_dp_ranks": [1], "prefill_api_port": 30003}},
            decode={"d-ingroup": {"vllm_pd_decode_dp_ranks": [0]}}, vllm_pd_prefill_dp_size=2),
    cluster("npus", {"p-npus-1": {"vllm_pd_prefill_dp_ranks": [0, 1], "vllm_pd_npu_count": 2}},
            vllm_pd_prefill_dp_size=2, vllm_pd_prefill_tp_size=4),
]


def render(inventory, tmp):
    """The messages the validation finds in INVENTORY (render.yml), grouped by cluster."""
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    r = subprocess.run([ansible_playbook, "-i", str(inventory), "-e", "ansible_python_interpreter=" + sys.executable,
                        "-e", "out=%s" % tmp, os.path.join(HERE, "render.yml")],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    found = {}
    for e in json.loads((tmp / "errors.json").read_text()):
        found.setdefault(e["cluster"], []).append(e["text"])
    return found


@pytest.fixture(scope="module")
def errors(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inventory-errors")
    children = {"vllm_pd_prefill": {"hosts": {}}, "vllm_pd_decode": {"hosts": {}}, "vllm_pd_proxy": {"hosts": {}}}
    for name, prefill, decode, group in CLUSTERS:
        children["vllm_pd_prefill"]["hosts"].update({h: {} for h in prefill})
        children["vllm_pd_decode"]["hosts"].update({h: {} for h in decode})
        children["vllm_pd_proxy"]["hosts"][next(iter(prefill))] = {}
        children["cluster_" + name] = group
    (tmp / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": children}}))
    return render(tmp / "hosts.yml", tmp)


def test_the_example_inventory_a_site_copies_is_consistent(tmp_path):
    assert render(os.path.join(ROOT, "inventory", "example"), tmp_path) == {}


def test_a_healthy_external_dp_cluster_has_no_error(errors):
    assert "good" not in errors, errors.get("good")


def test_every_faulty_cluster_is_named_and_no_error_is_global(errors):
    assert sorted(errors) == sorted(c[0] for c in CLUSTERS if c[0] != "good"), errors


@pytest.mark.parametrize("name, words", [
    ("gap", "cluster gap: prefill DP rank(s) 1, 3 of vllm_pd_prefill_dp_size=4 are served by no host. "
            "Fix: add them to vllm_pd_prefill_dp_ranks of a prefill host of the cluster"),
    ("twice", "cluster twice: prefill DP rank 1 is listed on p-twice-1 and p-twice-2 (vllm_pd_prefill_dp_ranks)"),
    ("mixed", "cluster mixed: p-mixed-1 set vllm_pd_prefill_dp_ranks (external DP) but p-mixed-2 do(es) not"),
    ("outside", "host p-outside-1: vllm_pd_prefill_dp_ranks=[0, 5] has rank(s) outside 0-1 (vllm_pd_prefill_dp_size=2)"),
    ("notalist", "host p-notalist-1: vllm_pd_prefill_dp_ranks=0,1 must be a list of DP ranks, e.g. [0, 1]"),
    ("apiport", "host p-apiport-1: prefill_api_port + 1 and vllm_pd_proxy_port are both 8101 on one host"),
    ("ingroup", "host p-ingroup-1: prefill_api_port=30003 lies inside the prefill port group of DP rank 1 (30002-30003)"),
    ("npus", "host p-npus-1: prefill uses NPU 7 but the host has vllm_pd_npu_count=2"),
])
def test_each_fault_is_named_with_host_variable_and_fix(errors, name, words):
    assert any(words in msg for msg in errors.get(name, [])), errors.get(name)
