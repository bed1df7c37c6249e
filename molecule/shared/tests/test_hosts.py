"""Real state on the PD hosts after a scenario's converge and side effect, read with testinfra.

The scenario's expectations come from molecule_pd_expect (kv_port, decode_extra_args, stopped,
residue_removed, residue_kept), passed by verify.yml with each host's resolved variables.
"""
import json

import pytest

KIND = {"vllm_pd_prefill": ("vllm-pd-prefill.service", "kv_producer"),
        "vllm_pd_decode": ("vllm-pd-decode.service", "kv_consumer")}


def engine(pd, name, group):
    """The running engine of UNIT as the kernel sees it: pid, environment, argv, --kv-transfer-config."""
    host, address = pd.host(name), pd.vars[name]["address"]
    unit = KIND[group][0]
    service = host.service(unit)
    assert service.is_running, f"{unit} is not active on {name}"
    pid = int(service.systemd_properties["MainPID"])
    environ = dict(e.split("=", 1) for e in host.file(f"/proc/{pid}/environ").content.decode().split("\0") if "=" in e)
    argv = [w for w in host.file(f"/proc/{pid}/cmdline").content.decode().split("\0") if w]
    nics = [n for n in host.interface.names() if address in host.interface(n, "inet").addresses]
    kv_config = json.loads(argv[argv.index("--kv-transfer-config") + 1])
    return {"pid": pid, "environ": environ, "argv": argv, "nic": nics[0] if nics else "", "kv_config": kv_config}


def check_engine(pd, name, group):
    e, address = engine(pd, name, group), pd.vars[name]["address"]
    env = {k: v for k, v in e["environ"].items() if k in ("VLLM_HOST_IP", "HCCL_IF_IP") or k.endswith("_IFNAME")}
    where = f"pid {e['pid']} of {KIND[group][0]} on {name}: environment {env}, data NIC {e['nic']} ({address})"
    assert e["pid"] > 0, where
    assert env.get("VLLM_HOST_IP") == address and env.get("HCCL_IF_IP") == address, where
    assert e["nic"], where
    for var in ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME"):
        assert env.get(var) == e["nic"], where
    assert e["kv_config"]["kv_role"] == KIND[group][1], e["kv_config"]
    assert e["argv"][e["argv"].index("--host") + 1] == address, e["argv"]
    return e


def test_prefill_engine_binds_the_data_ip_with_its_group(pd, prefill_name):
    v = pd.vars[prefill_name]
    e = check_engine(pd, prefill_name, "vllm_pd_prefill")
    assert int(e["kv_config"]["kv_port"]) == v["kv_port"], f"kv_port {e['kv_config']['kv_port']}, expected {v['kv_port']}"
    host = pd.host(prefill_name)
    closed = [p for p in range(v["kv_port"], v["kv_port"] + v["tp"] * v["dp"])
              if not host.socket(f"tcp://{v['address']}:{p}").is_listening]
    assert not closed, f"group ports not listening on {v['address']}: {closed}"


def test_decode_engine_agrees_with_its_prefill_engines(pd, decode_name):
    v = pd.vars[decode_name]
    e = check_engine(pd, decode_name, "vllm_pd_decode")
    extra = v["expect"].get("decode_extra_args", [])
    if extra:
        assert e["argv"][-len(extra):] == extra, f"argv {e['argv']}, expected to end with {extra}"
    peers = [n for n, pv in pd.vars.items() if "vllm_pd_prefill" in pv["groups"] and pv["cluster"] == v["cluster"]]
    assert peers, f"no prefill host of cluster {v['cluster']}"
    for p in peers:
        theirs = engine(pd, p, "vllm_pd_prefill")["kv_config"]["kv_connector_extra_config"]
        assert e["kv_config"]["kv_connector_extra_config"] == theirs, f"D {e['kv_config']} vs P {p} {theirs}"


def holders_before(text):
    """{name: record} of /etc/vllm-pd/stopped-services (one JSON object a line, kv_port_group's holders_off):
    the first record of a holder is its state before PD (later runs append nothing for it)."""
    out = {}
    for line in text.splitlines():
        if line.strip():
            rec = json.loads(line)
            out.setdefault(rec["name"], rec)
    return out


def expected_unit_state(rec):
    """(ActiveState, UnitFileState) an allowed unit holder has while PD runs: stopped, and disabled when the
    preflight disabled it (it was enabled: a reboot would bring it back onto the group), else as it was."""
    return "inactive", ("disabled" if rec.get("disable") else rec.get("enabled"))


def test_allowed_services_were_stopped_and_recorded(pd, prefill_name):
    stopped = pd.vars[prefill_name]["expect"].get("stopped", [])
    if not stopped:
        pytest.skip("the scenario expects no stopped services")
    host = pd.host(prefill_name)
    records = holders_before(host.file("/etc/vllm-pd/stopped-services").content_string)
    assert not set(stopped) - set(records), f"recorded {sorted(records)}, expected {stopped}"
    for name in stopped:
        rec, props = records[name], host.service(name).systemd_properties
        assert rec["kind"] == "unit" and rec["active"] is True, rec
        assert (props["ActiveState"], props["UnitFileState"]) == expected_unit_state(rec), (name, rec)


def test_stale_files_no_process_held_are_gone(pd, pd_name):
    expect, host = pd.vars[pd_name]["expect"], pd.host(pd_name)
    present = [f for f in expect.get("residue_removed", []) + expect.get("residue_kept", []) if host.file(f).exists]
    assert not set(present) & set(expect.get("residue_removed", [])), f"present: {present}"
    assert not set(expect.get("residue_kept", [])) - set(present), f"present: {present}"
