"""The lab NPU layer as the engine sees it: the state file of the lab's fake tools
(/etc/vllm-pd-lab/npu.json, docs/design.md "Lab NPU layer"). A broken NPU of P or D makes the KV
transfer fail the way the field reports it (shared/docs/field-failures.md 2-3): D's plog line
"[RanktablCheck] 'device ip' is not set correctly, ..." (vllm-ascend #7711) for an hccn.conf that does not
match, "HcclCommPrepare fail" for a link, health or TLS fault (PR #16847, #10224), then the connector's
"Mooncake transfer failed for request ..." with ret -1 (#8427). No state file: no NPU layer, no refusal.
Engines register their pid and NPUs so the fake npu-smi lists them (as the real one lists vLLM)."""
import atexit
import json
import os

from . import logs

STATE = os.environ.get("VLLM_PD_LAB_NPU_STATE", "/etc/vllm-pd-lab/npu.json")
PROCS = "/run/vllm-pd-lab/npu-procs"
_plog = logs.get("ascend_direct_transport.cpp:412")
_hccl = logs.get("hccl_communicator.cc:1208")
_devices = []


def _state():
    try:
        with open(STATE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def faults(devices, state=None):
    """[(device, kind, text)] of the NPUs among devices whose layer is broken; kind: 'conf' or 'hccl'."""
    state = state if state is not None else _state()
    if not state:
        return []
    npus = {n["id"]: n for n in state.get("npus", [])}
    out = []
    for d in devices:
        n = npus.get(int(d))
        if n is None:
            out.append((d, "hccl", "NPU %s is not on this host" % d))
            continue
        if n.get("conf_ip") and n["conf_ip"] != n["ip"]:
            out.append((d, "conf", "address_%s=%s in /etc/hccn.conf, device ip %s" % (d, n["conf_ip"], n["ip"])))
        if n.get("link") != "UP":
            out.append((d, "hccl", "link status %s" % n.get("link")))
        if n.get("net_health") != "Success":
            out.append((d, "hccl", "net health status %s" % n.get("net_health")))
        if n.get("health") != "OK":
            out.append((d, "hccl", "Health %s" % n.get("health")))
    return out


def startup(devices):
    """At engine start: remember the NPUs, register the pid for npu-smi, log what is broken."""
    _devices[:] = [int(d) for d in devices]
    try:
        os.makedirs(PROCS, exist_ok=True)
        path = os.path.join(PROCS, str(os.getpid()))
        with open(path, "w") as f:
            f.write(",".join(str(d) for d in _devices))
        atexit.register(lambda: os.path.exists(path) and os.remove(path))
    except OSError:
        pass
    for d, _kind, text in faults(_devices):
        _hccl.error("NPU %s of this engine: %s (KV transfers over it will fail)", d, text)


def advertise(rank_index):
    """What P tells D about the NPU of one rank (in the handshake metadata)."""
    if not _devices:
        return None
    d = _devices[rank_index % len(_devices)]
    state = _state()
    n = next((x for x in (state or {}).get("npus", []) if x["id"] == d), {})
    return {"device": d, "tls": n.get("tls"), "faults": [f[2] for f in faults([d], state)]} if state else None


def refuse(meta, d_rank):
    """-1 (after the plog lines) when the transfer between P's rank and D's rank d_rank cannot work, else 0."""
    if not _devices:
        return 0
    d = _devices[d_rank % len(_devices)]
    state = _state()
    mine = faults([d], state)
    peer = (meta or {}).get("npu") or {}
    local_tls = next((x.get("tls") for x in (state or {}).get("npus", []) if x["id"] == d), None)
    tls_differs = None not in (peer.get("tls"), local_tls) and peer["tls"] != local_tls
    if not mine and not peer.get("faults") and not tls_differs:
        return 0
    for _dev, kind, text in mine:
        if kind == "conf":
            _plog.error("[RanktablCheck] 'device ip' is not set correctly, must be set when multi Server or HCCL "
                        "INTRA ROCE ENABLE enabled (local NPU %s: %s)", d, text)
        else:
            _hccl.error("HcclCommPrepare fail, ret 0x9: local NPU %s: %s", d, text)
    for text in peer.get("faults") or []:
        _hccl.error("HcclCommPrepare fail, ret 0x9: remote NPU %s: %s", peer.get("device"), text)
    if peer.get("tls") is not None and local_tls is not None and peer["tls"] != local_tls:
        _hccl.error("HcclCommPrepare fail, ret 0x9: TLS switch local NPU %s [%s] != remote NPU %s [%s]",
                    d, local_tls, peer.get("device"), peer["tls"])
    return -1
