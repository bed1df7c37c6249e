"""P and D that fit together, model-aware port groups and a smoke request that proves the output (issue 15).

Clusters lab12 and lab13 of lab/gen-inventory (hosts pd-p12, pd-d12, pd-p13, pd-d13), so no other test's
lab is touched (this module does not use the session ``lab`` fixture, which would bring up inventory/lab):
- lab12 (the MoE lab model /models/lab-model, tp 8): each misfit is refused by the preflight before any engine
  starts, with its named finding and both values; then kv_corruption makes the smoke request fail showing both
  outputs, and without it the deploy passes.
- lab13 (the dense lab model /models/lab-dense, tp 4, external DP 2 instances per host, stand-in as vllm-ascend
  0.18.0, which resets a dense model's DP rank): deploys with one kv_port
  per instance and every group listening where the plan says; the same inventory with vllm_pd_model_kind: moe
  (the wrong kind) fails naming the collision.
Every container of both clusters is removed at the end.
"""
import json
import re
import subprocess

import pytest

from conftest import ROOT, own_lab

pytestmark = pytest.mark.lab

P12, D12, P13, D13 = "pd-p12", "pd-d12", "pd-p13", "pd-d13"
KV_PORT = 28002  # inventory/lab's
NO_ENGINE = "vllm-pd-*"


@pytest.fixture(scope="module")
def fit(tmp_path_factory):
    # 0.18.0: vLLM resets a dense model's DP rank to 0 (0.23's balance-scheduling patch keeps it: releases.py)
    lab13 = {"vllm_pd_model": "/models/lab-dense", "vllm_pd_prefill_tp_size": 4, "vllm_pd_prefill_dp_size": 2,
             "vllm_pd_decode_tp_size": 4, "vllm_pd_decode_dp_size": 2, "lab_vllm_ascend_release": "0.18.0"}
    with own_lab(tmp_path_factory, 12, clusters=2, group_vars={"lab13": lab13},
                 host_vars={P13: {"vllm_pd_prefill_dp_ranks": [0, 1]}, D13: {"vllm_pd_decode_dp_ranks": [0, 1]}}) as lab:
        lab.playbook("playbooks/stop_pd.yml", check=False)
        yield lab


def engines(lab, host):
    # a wildcard listing: testinfra reads one named unit at a time
    out = lab.run(host, f"systemctl list-units --plain --no-legend --type=service --state=active '{NO_ENGINE}'").stdout
    return sorted(line.split()[0] for line in out.splitlines() if line.strip())


def refused(lab, finding, *args, inventory=None):
    """Run the preflight of lab12 and require it to stop with FINDING; nothing may run afterwards."""
    cmd = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", inventory or lab.inventory,
           str(ROOT / "playbooks" / "preflight.yml"), "--limit", "cluster_lab12", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode != 0, r.stdout[-3000:]
    assert f"[{finding}]" in r.stdout, r.stdout[-5000:]
    assert "P and D do not fit together; no engine was started" in r.stdout
    assert engines(lab, P12) == [] and engines(lab, D12) == []
    return next(line for line in r.stdout.splitlines() if f"[{finding}]" in line)


def test_a_fitting_cluster_passes_the_preflight_and_a_short_transfer_timeout_only_warns(fit):
    env = {"vllm_pd_engine_env": {"VLLM_LAB_STARTUP_DELAY": "3", "ASCEND_TRANSFER_TIMEOUT": "10000"}}
    r = fit.playbook("playbooks/preflight.yml", "--limit", "cluster_lab12", "-e", json.dumps(env), check=False)
    assert r.returncode == 0, r.stdout[-4000:]
    out = " ".join(r.stdout.split())  # the YAML callback folds long messages
    assert "WARNING (the deploy goes on)" in out, r.stdout[-4000:]
    assert "[TransferTimeoutShort] prefill pd-p12, decode pd-d12: ASCEND_TRANSFER_TIMEOUT=10000 ms is not above the " \
           "RDMA retransmission budget 4.096 us * 2^20 * 7 = 30064 ms" in out, r.stdout[-4000:]


def test_block_size_only_on_d_is_refused(fit):
    line = refused(fit, "BlockSizeMismatch", "-e", "decode_block_size=64")
    assert "unset (platform default 128) on prefill pd-p12" in line and "64 on decode pd-d12" in line, line


def test_block_size_in_the_extra_args_is_read(fit):
    line = refused(fit, "BlockSizeMismatch", "-e", json.dumps({"decode_extra_args": ["--block-size=256"]}))
    assert "256 on decode pd-d12 (extra args --block-size)" in line, line


def test_kv_cache_dtype_differing_is_refused(fit):
    line = refused(fit, "KvCacheDtypeMismatch", "-e", "prefill_kv_cache_dtype=int8", "-e", "decode_kv_cache_dtype=fp8")
    assert "int8 on prefill pd-p12" in line and "fp8 on decode pd-d12" in line, line


def test_spec_decoding_only_on_p_is_refused(fit):
    spec = {"prefill_speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}
    line = refused(fit, "SpecDecodeMismatch", "-e", json.dumps(spec))
    assert '{"method": "mtp", "num_speculative_tokens": 1} on prefill pd-p12' in line, line
    assert "unset (no speculative decoding) on decode pd-d12" in line and "one side only" in line, line


def test_one_byte_of_d_config_json_is_refused(fit):
    path = "/models/lab-model/config.json"
    d = fit.host(D12)
    before = d.file(path).content_string
    fit.run(D12, f"cp {path} /root/config.json.orig && sed -i '0,/64/s//65/' {path}")
    try:
        after = d.file(path).content_string
        assert len(before) == len(after) and sum(a != b for a, b in zip(before, after)) == 1
        line = refused(fit, "ModelMismatch")
        assert "on prefill pd-p12 has model fingerprint" in line and "on decode pd-d12 has" in line, line
        assert "files that differ: config.json" in line, line
        fps = re.findall(r"(?:fingerprint|has) ([0-9a-f]{16})", line)
        assert len(fps) == 2 and fps[0] != fps[1], line
    finally:
        fit.run(D12, f"mv /root/config.json.orig {path}")


def test_p_and_d_on_one_host_need_intra_roce(fit, tmp_path):
    inv = tmp_path / "one-host"
    subprocess.run(["cp", "-r", fit.inventory, str(inv)], check=True)
    hosts = (inv / "hosts.yml").read_text().replace(
        "vllm_pd_decode: {hosts: {pd-d12: {}, pd-d13: {}}}", "vllm_pd_decode: {hosts: {pd-p12: {}, pd-d12: {}, pd-d13: {}}}")
    (inv / "hosts.yml").write_text(hosts)
    (inv / "group_vars" / "cluster_lab12.yml").write_text(
        "---\nvllm_pd_prefill_tp_size: 4\nvllm_pd_decode_tp_size: 4\n")
    (inv / "host_vars" / f"{P12}.yml").write_text("---\nprefill_devices: [0, 1, 2, 3]\ndecode_devices: [4, 5, 6, 7]\n")
    line = refused(fit, "IntraRoceMissing", inventory=str(inv))
    assert "prefill and decode both run on pd-p12" in line and "unset for prefill and unset for decode" in line, line


def test_kv_corruption_fails_the_smoke_with_both_outputs_and_passes_without(fit):
    fit.fixtures(D12, ["kv_corruption"])
    try:
        r = fit.playbook("playbooks/deploy_pd.yml", "--limit", "cluster_lab12", check=False)
        assert r.returncode != 0, r.stdout[-4000:]
        # the texts are JSON strings inside the JSON of the failure (quotes escaped there)
        m = re.search(r'through P and D: \\?"(.*?)\\?" differs from P alone: \\?"(.*?)\\?"', r.stdout)
        assert m, r.stdout[-5000:]
        through, alone = m.group(1), m.group(2)
        assert through and alone and through != alone
        assert "KV cache transfer for request" in r.stdout  # the transfer happened, silently wrong
    finally:
        fit.fixtures(D12, state="absent")
    r = fit.playbook("playbooks/deploy_pd.yml", "--limit", "cluster_lab12", check=False)
    assert r.returncode == 0, r.stdout[-5000:]
    assert "the same text as P alone" in r.stdout


def test_doctor_reads_what_the_engines_run_and_names_a_misfit(fit, tmp_path):
    """lab12 is deployed and fits (the test before); D restarted with another HCCL_RDMA_TIMEOUT no longer does."""
    env_file = fit.host(D12).file("/etc/vllm-pd/decode.env")
    # the name the installed release reads (the lab's stand-in is 0.23.0.post1: the release table's abort_env)
    assert "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT=30" in env_file.content_string.splitlines()
    assert "VLLM_NIXL_ABORT_REQUEST_TIMEOUT=30" not in env_file.content_string
    health = f"http://{fit.hosts[D12]['data_ip']}:8200/health"
    fit.run(D12, "echo HCCL_RDMA_TIMEOUT=18 >> /etc/vllm-pd/decode.env && systemctl restart vllm-pd-decode.service && "
                 f"for _ in $(seq 120); do python3 -c 'import urllib.request; urllib.request.urlopen(\"{health}\", "
                 "timeout=1)' 2>/dev/null && break; sleep 0.5; done")
    assert fit.host(D12).service("vllm-pd-decode.service").is_running
    out = tmp_path / "doctor.json"
    r = fit.playbook("playbooks/doctor.yml", "--limit", "cluster_lab12", "-e", f"vllm_pd_doctor_json={out}",
                     "-e", f"vllm_pd_doctor_report={out.with_suffix('.html')}", check=False)
    assert r.returncode != 0 and out.exists(), r.stdout[-4000:]
    data = json.loads(out.read_text())
    cause = next(c for c in data["clusters"] if c["name"] == "lab12")["root_cause"]
    assert cause and cause["check"] == "EngineEnvMismatch", data["findings"]
    assert "HCCL_RDMA_TIMEOUT is unset on prefill pd-p12 and 18 on decode pd-d12" in cause["title"], cause


def argv(lab, host, unit):
    h = lab.host(host)
    pid = h.service(unit).systemd_properties["MainPID"]
    return h.file(f"/proc/{pid}/cmdline").content_string.split("\0")[:-1]


def listeners(lab, host, unit):
    """The ports listening in UNIT's cgroup (lab.owner reads the holder's /proc/PID/cgroup)."""
    return {port for port in lab.ports(host) if f"/{unit}" in lab.owner(host, port)}


def test_dense_external_dp_runs_independent_instances_with_a_kv_port_each(fit):
    r = fit.playbook("playbooks/deploy_pd.yml", "--limit", "cluster_lab13", check=False)
    assert r.returncode == 0, r.stdout[-5000:]
    assert "the same text as P alone" in r.stdout
    for rank in (0, 1):
        unit = f"vllm-pd-prefill-dp{rank}.service"
        words = argv(fit, P13, unit)
        assert not [w for w in words if w.startswith("--data-parallel-") and w != "--data-parallel-size"], words
        assert words[words.index("--data-parallel-size") + 1] == "1", words
        kv = json.loads(words[words.index("--kv-transfer-config") + 1])
        assert kv["kv_port"] == KV_PORT + rank * 4, kv
        assert kv["kv_connector_extra_config"]["prefill"]["dp_size"] == 1, kv
        group = set(range(KV_PORT + rank * 4, KV_PORT + rank * 4 + 4))
        held = listeners(fit, P13, unit)
        assert held & set(range(KV_PORT, KV_PORT + 8)) == group, (rank, sorted(held))
    proxy = " ".join(argv(fit, P13, "vllm-pd-proxy.service"))
    p_ip = fit.hosts[P13]["data_ip"]
    assert f"--prefiller-hosts {p_ip} {p_ip} --prefiller-ports 8100 8101" in proxy, proxy


def test_dense_model_planned_as_moe_fails_naming_the_collision(fit):
    # the dense ranks of the test before still run with DP size 1 each; planned as MoE, every engine's DP size
    # becomes 2, which old and new engines cannot share while it rolls: refused before any change ...
    before = engines(fit, P13) + engines(fit, D13)
    r = fit.playbook("playbooks/deploy_pd.yml", "--limit", "cluster_lab13", "-e", "vllm_pd_model_kind=moe", check=False)
    text = " ".join(r.stdout.split())
    assert r.returncode != 0 and "ChangeNotRollable: dp size change(s)" in text, r.stdout[-4000:]
    assert "dp size on prefill: 1 -> 2; dp size on decode: 1 -> 2" in text, r.stdout[-4000:]
    assert engines(fit, P13) + engines(fit, D13) == before
    # ... and with the stop-the-cluster change allowed, the start runs into the collision the plan predicts
    r = fit.playbook("playbooks/deploy_pd.yml", "--limit", "cluster_lab13", "-e", "vllm_pd_model_kind=moe",
                     "-e", "vllm_pd_allow_downtime=true", check=False)
    try:
        assert r.returncode != 0, r.stdout[-4000:]
        assert "Address already in use" in r.stdout, r.stdout[-6000:]
        assert "prefill-dp1 (vllm-pd-prefill-dp1.service, moe model): kv_port 28002, tp 4, pp 1, pcp 1, DP rank in the port " \
               "formula 1 -> group 28006-28009" in r.stdout, r.stdout[-6000:]
        assert "the model on this host reads as dense" in r.stdout
    finally:
        fit.playbook("playbooks/stop_pd.yml", "--limit", "cluster_lab13", check=False)
