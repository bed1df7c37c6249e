"""Pipeline parallelism in the port plan, and the reserved windows from the engine environment (issue 31 items 2, 3).

With ``--pipeline-parallel-size 2`` in prefill_extra_args, P's group is kv_port + (pp_rank*pcp + pcp_rank)*tp + tp_rank
for both stages (vllm-ascend 0.23 mooncake_connector.py 2029-2038): the preflight names a busy port of the second
stage before anything changes, and a deploy verifies every port of the group (the stand-in binds them as the
connector does) and gives D prefill.pp_size. Then each window the Ascend transports bind from (ADXL from
ASCEND_BASE_PORT, the Transfer Engine RPC range MC_MIN/MAX_RPC_PORT, HCCL from HCCL_IF_BASE_PORT) is moved onto the
group through vllm_pd_engine_env: the preflight names the collision in the moved window before any change.

Cluster lab26 of lab/gen-inventory (hosts pd-p26, pd-d26), so other clusters are left alone; its containers are
removed at the end.
"""
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from conftest import own_lab

pytestmark = pytest.mark.lab

C, P, D = "cluster_lab26", "pd-p26", "pd-d26"
# tp 4 x pp 2 = the lab host's 8 NPUs; D keeps pp 1 (the connector asserts it)
SIZES = {"vllm_pd_prefill_tp_size": 4, "vllm_pd_decode_tp_size": 4,
         "prefill_extra_args": ["--pipeline-parallel-size", "2"]}


@pytest.fixture(scope="module")
def l26(tmp_path_factory):
    with own_lab(tmp_path_factory, 26, group_vars={"lab26": SIZES}) as lab:
        lab.playbook("playbooks/stop_pd.yml")
        pd = yaml.safe_load((Path(lab.inventory) / "group_vars" / "all" / "pd.yml").read_text())
        lab.kv_port = int(pd["vllm_pd_kv_port"])
        lab.base_env = pd["vllm_pd_engine_env"]
        yield lab


def group(kv_port, tp=4, pp=2, pcp=1, rank=0):
    return [kv_port + rank * tp * pp * pcp + (p * pcp + c) * tp + t for p in range(pp) for c in range(pcp)
            for t in range(tp)]


def nothing_changed(lab, r):
    assert set(lab.changed(r).values()) == {0}, r.stdout[-3000:]
    for h in (P, D):
        units = lab.host(h).file("/etc/systemd/system")
        assert not [n for n in units.listdir() if n.startswith("vllm-pd")], (h, units.listdir())


def test_a_busy_port_of_the_second_pipeline_stage_is_named_before_start(l26):
    port = group(l26.kv_port)[6]  # stage 1 (pp_rank 1), tp_rank 2: kv_port + 6
    l26.fixtures(P, ["conflict_process"], lab_conflict_process_port=port)
    try:
        r = l26.playbook("playbooks/deploy_pd.yml", "--limit", C, check=False)
    finally:
        l26.fixtures(P, state="absent")
    assert r.returncode != 0
    assert re.search(r"\[PortBusy\] port\(s\) %d busy: 0\.0\.0\.0:%d held by pid \d+" % (port, port), r.stdout), \
        r.stdout[-4000:]
    # the whole group of both stages was checked, in the plan's words
    assert "kv_port group %d-%d" % (l26.kv_port, l26.kv_port + 7) in r.stdout, r.stdout[-4000:]
    nothing_changed(l26, r)


@pytest.mark.parametrize("moved, check, window", [
    ({"ASCEND_BASE_PORT": "KV-1000"}, "AdxlWindow", "KV-1000-KV+6999"),
    ({"MC_MIN_RPC_PORT": "KV+5", "MC_MAX_RPC_PORT": "KV+100"}, "TeRpcRange", "KV+5-KV+100"),
    ({"HCCL_IF_BASE_PORT": "KV+7"}, "HcclRange", "KV+7-KV+38"),
])
def test_a_window_moved_by_the_engine_env_is_named_before_any_change(l26, moved, check, window):
    def value(text):
        return str(eval(text.replace("KV", str(l26.kv_port))))  # noqa: S307 - the test's own arithmetic

    env = dict(l26.base_env, **dict((k, value(v)) for k, v in moved.items()))
    lo, hi = (value(x) for x in re.match(r"^(KV[-+]\d+)-(KV[-+]\d+)$", window).groups())
    hv = Path(l26.inventory) / "host_vars" / f"{P}.yml"
    hv.write_text("---\n" + json.dumps({"vllm_pd_engine_env": env}) + "\n")
    try:
        r = l26.playbook("playbooks/deploy_pd.yml", "--limit", C, check=False)
    finally:
        hv.unlink()
    assert r.returncode != 0
    m = re.search(r"\[%s\] port\(s\) ([0-9,-]+) of the group overlap the [^;]*? %s-%s;" % (check, lo, hi), r.stdout)
    assert m, r.stdout[-4000:]
    nothing_changed(l26, r)


def test_the_deploy_verifies_every_port_of_both_stages_and_d_reads_the_pipeline_size(l26):
    r = l26.playbook("playbooks/deploy_pd.yml", "--limit", C)
    want = group(l26.kv_port)
    listening = {port for addr, port in l26.listening(P) if addr == l26.hosts[P]["data_ip"]}
    assert set(want) <= listening, (want, sorted(listening))
    for port in want:
        assert "vllm-pd-prefill.service" in l26.owner(P, port), port
    # the listening check of the role saw the same 8 ports (its loop label is the unit; the ports are its result)
    assert "Verify every port of each instance's group listens on VLLM_HOST_IP" in r.stdout
    # D launched with P's pipeline size in kv_connector_extra_config.prefill, and pp 1 itself
    unit = l26.host(D).file("/etc/systemd/system/vllm-pd-decode.service").content_string
    argv = shlex.split(next(line for line in unit.splitlines() if line.startswith("ExecStart="))[len("ExecStart="):])
    extra = json.loads(argv[argv.index("--kv-transfer-config") + 1])["kv_connector_extra_config"]
    assert extra["prefill"] == {"tp_size": 4, "dp_size": 1, "pp_size": 2}, extra
    assert "--pipeline-parallel-size" not in argv
    # the start guard of P checks the same group (a restart goes through it)
    guard = json.loads(l26.host(P).file("/etc/vllm-pd/prefill.guard.json").content_string)
    assert guard["group"]["pp_size"] == 2 and guard["group"]["tp_size"] == 4
    l26.run(P, "systemctl restart vllm-pd-prefill.service")
    # the smoke of the deploy proved KV moves from both stages (D pulls every stage's workers)
    assert "KV cache transfer" in l26.run(D, "journalctl -u vllm-pd-decode.service --no-pager -o cat").stdout
