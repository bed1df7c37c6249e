"""Several vLLM instances per host (issue 5): external DP, one instance per DP rank, each with its
own unit, API port and Mooncake port group, found by the proxy and by D.

Cluster lab8 of lab/gen-inventory (hosts pd-p8, pd-d8), so the default lab is left alone: tp 4 and
dp 2 on both sides, each host serving ranks 0 and 1 as two instances. Its containers are removed
at the end.
"""
import json
import shlex
from pathlib import Path

import pytest

from conftest import own_lab

P, D = "pd-p8", "pd-d8"
KV_PORT = 28002  # inventory/lab's
TP = 4


@pytest.fixture(scope="module")
def edp(lab, tmp_path_factory):
    sizes = {"vllm_pd_prefill_tp_size": 4, "vllm_pd_prefill_dp_size": 2, "vllm_pd_decode_tp_size": 4,
             "vllm_pd_decode_dp_size": 2}
    with own_lab(tmp_path_factory, 8, group_vars={"lab8": sizes}) as edp:
        yield edp


def set_ranks(edp, ranks):
    for host, var in ((P, "vllm_pd_prefill_dp_ranks"), (D, "vllm_pd_decode_dp_ranks")):
        path = Path(edp.inventory) / "host_vars" / f"{host}.yml"
        if ranks is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(f"---\n{var}: {json.dumps(ranks)}\n")


def units(edp, host, pattern):
    out = edp.ssh(host, f"systemctl list-units --plain --no-legend --type=service --state=active '{pattern}'").stdout
    return sorted(line.split()[0] for line in out.splitlines() if line.strip())


def argv(edp, host, unit):
    h = edp.host(host)
    pid = h.service(unit).systemd_properties["MainPID"]
    return h.file(f"/proc/{pid}/cmdline").content.decode().split("\0")[:-1]


def listeners(edp, host, unit):
    """Ports listened on by the processes of UNIT (its cgroup), from ss (testinfra does not name owners)."""
    h = edp.host(host)
    cgroup = h.service(unit).systemd_properties["ControlGroup"]
    pids = set(h.file(f"/sys/fs/cgroup/systemd{cgroup}/cgroup.procs").content_string.split())
    out = edp.ssh(host, "ss -Htlnp").stdout
    ports = set()
    for line in out.splitlines():
        fields = line.split()
        if any(f"pid={p}," in line for p in pids):
            ports.add(int(fields[3].rsplit(":", 1)[1]))
    return ports


def test_each_dp_rank_runs_as_its_own_instance_and_kv_moves(edp):
    set_ranks(edp, [0, 1])
    r = edp.playbook("playbooks/deploy_pd.yml", check=False)
    assert r.returncode == 0, r.stdout[-5000:]
    assert "KV moved P -> D for" in r.stdout
    assert units(edp, P, "vllm-pd-prefill*") == ["vllm-pd-prefill-dp0.service", "vllm-pd-prefill-dp1.service"]
    assert units(edp, D, "vllm-pd-decode*") == ["vllm-pd-decode-dp0.service", "vllm-pd-decode-dp1.service"]
    p_ip, d_ip = edp.hosts[P]["data_ip"], edp.hosts[D]["data_ip"]
    for host, kind, api, ip in ((P, "prefill", 8100, p_ip), (D, "decode", 8200, d_ip)):
        for rank in (0, 1):
            words = argv(edp, host, f"vllm-pd-{kind}-dp{rank}.service")
            joined = " ".join(words)
            assert f"--port {api + rank}" in joined, words
            assert f"--data-parallel-size 2 --data-parallel-rank {rank} --data-parallel-size-local 1" in joined, words
            assert f"--data-parallel-address {ip}" in joined, words  # rank 0 of that side is on this host
            env = edp.host(host).file(f"/etc/vllm-pd/{kind}-dp{rank}.env").content_string
            assert f"VLLM_HOST_IP={ip}" in env
            assert f"ASCEND_RT_VISIBLE_DEVICES={','.join(str(rank * TP + i) for i in range(TP))}" in env, env
    # Of the two groups (kv_port .. + dp*tp - 1), each P instance holds exactly its rank's tp ports.
    both = set(range(KV_PORT, KV_PORT + 2 * TP))
    for rank in (0, 1):
        held = listeners(edp, P, f"vllm-pd-prefill-dp{rank}.service")
        assert held & both == set(range(KV_PORT + rank * TP, KV_PORT + rank * TP + TP)), (rank, sorted(held))
        assert 8100 + rank in held
    proxy = " ".join(argv(edp, P, "vllm-pd-proxy.service"))
    assert f"--prefiller-hosts {p_ip} {p_ip} --prefiller-ports 8100 8101" in proxy, proxy
    assert f"--decoder-hosts {d_ip} {d_ip} --decoder-ports 8200 8201" in proxy, proxy


def test_requests_reach_every_instance_through_the_proxy(edp):
    # The example proxy picks the decoder with the fewest active tokens, ties to the first listed: requests one
    # after another all go to rank 0. Concurrent bursts overlap, so the second of a burst goes to rank 1.
    body = json.dumps({"model": "/models/lab-model", "prompt": "external dp", "max_tokens": 16})
    url = f"http://{edp.hosts[P]['data_ip']}:8000/v1/completions"
    script = (f"import urllib.request\nfrom concurrent.futures import ThreadPoolExecutor\n"
              f"def one(_):\n"
              f"    req = urllib.request.Request({url!r}, data={body!r}.encode(), "
              f"headers={{'Content-Type': 'application/json'}})\n"
              f"    return b'text' in urllib.request.urlopen(req, timeout=60).read()\n"
              f"with ThreadPoolExecutor(8) as pool:\n"
              f"    assert all(pool.map(one, range(8)))\n")
    logs = {}
    for _burst in range(5):
        edp.ssh(P, "python3 -c " + shlex.quote(script))
        logs = {rank: edp.ssh(D, f"journalctl -u vllm-pd-decode-dp{rank}.service -o cat --no-pager").stdout
                for rank in (0, 1)}
        if all("KV cache transfer for request" in log for log in logs.values()):
            break
    for rank, log in logs.items():
        assert "KV cache transfer for request" in log, f"decode rank {rank} pulled no KV:\n{log[-2000:]}"


def test_switching_back_to_one_instance_is_refused_until_the_old_ones_are_stopped(edp):
    set_ranks(edp, None)
    r = edp.playbook("playbooks/deploy_pd.yml", check=False)
    assert r.returncode != 0
    assert "vllm-pd-prefill-dp0.service" in r.stdout and "add vllm-pd-prefill-dp0.service to vllm_pd_stop_services" \
        in r.stdout, r.stdout[-5000:]
    assert units(edp, P, "vllm-pd-prefill*") == ["vllm-pd-prefill-dp0.service", "vllm-pd-prefill-dp1.service"]
    edp.playbook("playbooks/stop_pd.yml")
    assert units(edp, P, "vllm-pd-*") == [] and units(edp, D, "vllm-pd-*") == []
    r = edp.playbook("playbooks/deploy_pd.yml", check=False)
    assert r.returncode == 0, r.stdout[-5000:]
    assert units(edp, P, "vllm-pd-prefill*") == ["vllm-pd-prefill.service"]
    assert units(edp, D, "vllm-pd-decode*") == ["vllm-pd-decode.service"]
