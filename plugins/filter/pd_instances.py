# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_instances
short_description: The vLLM instances one PD host runs, with their units, ports, DP ranks and NPUs
version_added: "1.0.0"
description:
  - Without O(dp_ranks), the host runs one instance that serves all O(dp_size) data parallel ranks
    itself (vLLM's internal DP); its unit is C(vllm-pd-KIND.service).
  - With O(dp_ranks) (inventory V(vllm_pd_prefill_dp_ranks) or V(vllm_pd_decode_dp_ranks)), the host
    runs one instance per listed rank (external DP, as vllm-ascend's external_dp guide launches it), with
    unit C(vllm-pd-KIND-dpR.service), API port O(api_port) + its index on the host, and
    C(--data-parallel-rank R --data-parallel-size-local 1).
  - The Mooncake port group of an instance depends on the model kind (O(model_kind)), because vLLM resets
    C(data_parallel_rank) to 0 for a dense (non-MoE) model and vllm-ascend derives the side channel port from it
    (C(kv_port + data_parallel_rank * tp)).
  - The group of one DP rank R is C(tp*pp*pcp) ports wide (vllm-ascend's Mooncake connector,
    C(kv_port + R*tp*pp*pcp + (pp_rank*pcp + pcp_rank)*tp + tp_rank)); below, "width" is C(tp*pp*pcp).
  - V(moe) (and any model with O(dp_size) 1) - each instance gets O(kv_port); its group is C(kv_port + R*width .. +
    width - 1) for each rank R it serves.
  - V(dense) with external DP - each listed rank R becomes an independent instance without C(--data-parallel-*)
    options (vLLM's rule for non-MoE models), launched with C(--data-parallel-size 1) and its own kv_port
    C(kv_port + R*width), so its group C(kv_port + R*width .. + width - 1) never overlaps another instance's.
  - V(dense) with internal DP and O(dp_size) > 1 on prefill is refused - every engine core would bind
    C(kv_port .. + width - 1) - unless O(dense_keeps_rank), which gives it the MoE plan.
  - NPUs are given out in order, C(width) per rank; O(devices) lists the host's NPU ids to use
    (default C(0 ..)).
  - Input that cannot describe instances is an error naming the variable and the host.
options:
  _input:
    description: The kind of engine, V(prefill) or V(decode).
    type: str
    required: true
  tp_size:
    description: Tensor parallel size of one instance.
    type: int
    required: true
  pp_size:
    description:
      - Pipeline parallel size (inventory V(vllm_pd_prefill_pp_size) / V(vllm_pd_decode_pp_size)); unset takes
        C(--pipeline-parallel-size)/C(-pp) of O(extra_args), else 1. Both given must agree.
    type: int
  pcp_size:
    description:
      - Prefill context parallel size (V(vllm_pd_prefill_pcp_size) / V(vllm_pd_decode_pcp_size)); unset takes
        C(--prefill-context-parallel-size)/C(-pcp) of O(extra_args), else 1. Both given must agree.
    type: int
  extra_args:
    description: The engine's extra C(vllm serve) arguments (V(prefill_extra_args) / V(decode_extra_args)).
    type: list
    elements: str
    default: []
  dp_size:
    description: Data parallel size of this side of the cluster.
    type: int
    default: 1
  dp_ranks:
    description: The DP ranks this host serves as separate instances; empty for internal DP.
    type: list
    elements: int
    default: []
  api_port:
    description: API port of the first instance; the next ones count up from it.
    type: int
    required: true
  devices:
    description: NPU ids of the host for these instances, in order; empty means C(0 ..).
    type: list
    elements: int
    default: []
  runtime:
    description: How the instances run, V(systemd) (vllm on the host) or V(container) (the engine image).
    type: str
    default: systemd
  container_engine:
    description: V(podman) or V(docker), for the container runtime.
    type: str
    default: podman
  container_image:
    description: The engine image, for the container runtime.
    type: str
    default: ""
  hostname:
    description: Inventory name, used in error messages.
    type: str
  kv_port:
    description: The side's base kv_port (V(prefill_kv_port) or V(vllm_pd_kv_port)); 0 means not known yet.
    type: int
    default: 0
  model_kind:
    description:
      - V(moe), V(dense), or V(unknown) (C(config.json) not readable and V(vllm_pd_model_kind) is V(auto)).
      - V(unknown) is an error only where the kind decides the ports (O(dp_size) > 1).
    type: str
    default: moe
  dense_keeps_rank:
    description:
      - Whether the installed vllm-ascend keeps the C(data_parallel_rank) of each DP rank of a dense model (the release
        table's C(dense_dp_keeps_rank), filter C(pd_dense_keeps_rank)); then a dense model's internal DP binds the
        MoE port plan and is not refused on prefill.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: The prefill instances of this host
  ansible.builtin.set_fact:
    prefill_instances: "{{ 'prefill' | vllm_pd.ascend.pd_instances(tp_size=4, dp_size=4, dp_ranks=[2, 3],
      api_port=8100, hostname=inventory_hostname) }}"
# -> [{name: prefill-dp2, unit: vllm-pd-prefill-dp2.service, api_port: 8100, dp_rank_start: 2, devices: ['0', .. '3'], ..},
#     {name: prefill-dp3, unit: vllm-pd-prefill-dp3.service, api_port: 8101, dp_rank_start: 3, devices: ['4', .. '7'], ..}]
"""

RETURN = r"""
_value:
  description:
    - One dict per instance, in rank order.
    - C(kind), C(name) (V(prefill) or V(prefill-dpR)), C(unit), C(env_file), C(api_port), C(dp_rank_start) and
      C(dp_size_local) (the ranks whose port groups the instance binds), C(devices) (NPU ids as strings),
      C(external) (true for external DP) and C(dp_args) (the DP options of C(vllm serve) beyond
      C(--data-parallel-size), without the address and RPC port of rank 0, which come from facts).
    - C(runtime), C(container) (V(vllm-pd-NAME) for the container runtime, else null), C(container_engine)
      and C(container_image).
    - C(kv_port) (the kv_port of this instance's C(--kv-transfer-config)), C(tp) (its tensor parallel size),
      C(dp_size) (its C(--data-parallel-size)), C(port_rank_start) (the first C(data_parallel_rank) vLLM uses in the
      port formula; 0 for an independent dense instance), C(pp) and C(pcp) (its pipeline and prefill context
      parallel sizes), C(parallel_args) (the C(--pipeline-parallel-size)/C(--prefill-context-parallel-size)
      options the collection adds, for a size only an inventory variable gives) and C(model_kind). The port group is
      C(kv_port + (port_rank_start + i) * tp*pp*pcp + w) for i < C(dp_size_local), w < C(tp*pp*pcp) (filter
      C(pd_group_ports) lists it from an instance). Every
      consumer (preflight, start guard, listening and reachability checks, doctor) reads it from here.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.parallel import side_sizes
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_formula import group_bounds, group_width
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import instance_ports
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases

# the `vllm serve` options of the plan's argv pieces (the same in every release of the table)
_FLAG = releases.runtime(None)['serve_flags']

KINDS = ("prefill", "decode")
RUNTIMES = ("systemd", "container")
MODEL_KINDS = ("moe", "dense", "unknown")


def _int(value, what):
    try:
        if isinstance(value, bool) or int(value) != float(value):
            raise ValueError
        return int(value)
    except (TypeError, ValueError):
        raise ValueError("%s=%r is not a whole number" % (what, value))


def engine_instances(kind, tp_size, dp_size=1, dp_ranks=None, api_port=0, devices=None, hostname="this host",
                     runtime="systemd", container_engine="podman", container_image="", kv_port=0, model_kind="moe",
                     pp_size=1, pcp_size=1, dense_keeps_rank=False):
    """Instances of one kind on one host (see DOCUMENTATION). Raises ValueError naming the variable.

    pp_size and pcp_size (default 1) are the pipeline and prefill context parallel sizes of every instance:
    a DP rank's group is tp*pp*pcp ports wide and it takes as many NPUs."""
    if kind not in KINDS:
        raise ValueError("engine kind %r is not one of %s" % (kind, ", ".join(KINDS)))
    where = "host %s: " % hostname
    if runtime not in RUNTIMES:
        raise ValueError(where + "%s_runtime=%s is not one of %s" % (kind, runtime, ", ".join(RUNTIMES)))
    tp = _int(tp_size, "vllm_pd_%s_tp_size" % kind)
    dp = _int(dp_size, "vllm_pd_%s_dp_size" % kind)
    port = _int(api_port, "%s_api_port" % kind)
    pp = _int(pp_size, "vllm_pd_%s_pp_size" % kind)
    pcp = _int(pcp_size, "vllm_pd_%s_pcp_size" % kind)
    if tp < 1 or dp < 1 or pp < 1 or pcp < 1:
        raise ValueError(where + "vllm_pd_%s_tp_size, _dp_size, _pp_size and _pcp_size must be >= 1" % kind)
    width = group_width(tp, pp, pcp)
    ranks_var = "vllm_pd_%s_dp_ranks" % kind
    ranks = [_int(r, ranks_var) for r in (dp_ranks or [])]
    if len(set(ranks)) != len(ranks):
        raise ValueError(where + "%s=%s lists a rank twice. Fix: list each rank once" % (ranks_var, ranks))
    outside = [r for r in ranks if not 0 <= r < dp]
    if outside:
        raise ValueError(where + "%s=%s has rank(s) %s outside 0-%d (vllm_pd_%s_dp_size=%d). Fix: use ranks "
                         "below the DP size" % (ranks_var, ranks, outside, dp - 1, kind, dp))
    ranks = sorted(ranks)
    base_kv = _int(kv_port or 0, "%s_kv_port" % kind)
    if model_kind not in MODEL_KINDS:
        raise ValueError(where + "vllm_pd_model_kind=%s is not one of auto, moe, dense" % model_kind)
    if dp > 1 and model_kind == "unknown":
        raise ValueError(where + "vllm_pd_model_kind is auto but the model's config.json could not be read here or does "
                         "not tell MoE from dense the way vLLM reads it (pd_model_facts error), and with "
                         "vllm_pd_%s_dp_size=%d the kind decides the kv_port groups (vLLM resets the DP rank of a dense "
                         "model to 0). Fix: set vllm_pd_model_kind to moe or dense" % (kind, dp))
    # vLLM: non-MoE DP ranks are independent engines with data_parallel_rank 0 (vllm/v1/engine/core.py).
    independent = model_kind == "dense" and bool(ranks)
    # a release that keeps the rank (vllm-ascend's balance-scheduling patch) binds each rank as MoE does
    if model_kind == "dense" and dp > 1 and not ranks and kind == "prefill" and not dense_keeps_rank:
        raise ValueError(where + "the model is dense and vllm_pd_prefill_dp_size=%d without vllm_pd_prefill_dp_ranks: this "
                         "vllm-ascend release runs each DP rank of a dense model as an independent engine with "
                         "data_parallel_rank 0, so all of them would bind kv_port .. kv_port+%d (Address already in use). "
                         "Fix: list the ranks in vllm_pd_prefill_dp_ranks (one instance each, with a kv_port of its own), "
                         "set VLLM_ASCEND_BALANCE_SCHEDULING: \"1\" in vllm_pd_engine_env (vllm-ascend 0.18.0 and 0.23: each "
                         "rank keeps its rank), or set vllm_pd_model_kind: moe if the model is MoE" % (dp, group_bounds(0, tp, pp, pcp).last))
    slots = [[r] for r in ranks] if ranks else [list(range(dp))]
    served = sum(len(s) for s in slots)
    need = group_bounds(0, tp, pp, pcp, 0, served).size
    npus = [_int(d, "%s_devices" % kind) for d in (devices or [])] or list(range(need))
    if len(npus) != need:
        raise ValueError(where + "%s_devices has %d NPU ids but this host's %s instances need tp*pp*pcp %d x %d rank(s) "
                         "= %d. Fix: list exactly %d ids" % (kind, len(npus), kind, width, served, need, need))
    out, used = [], 0
    for index, slot in enumerate(slots):
        name = kind if not ranks else "%s-dp%d" % (kind, slot[0])
        count = group_bounds(0, tp, pp, pcp, 0, len(slot)).size
        out.append({
            "kind": kind,
            "name": name,
            "unit": "vllm-pd-%s.service" % name,
            "env_file": "/etc/vllm-pd/%s.env" % name,
            "api_port": port + index,
            "dp_rank_start": slot[0],
            "dp_size_local": len(slot),
            "devices": [str(d) for d in npus[used:used + count]],
            "external": bool(ranks),
            "dp_args": ([_FLAG["data_parallel_rank"], str(slot[0]), _FLAG["data_parallel_size_local"], "1"]
                        if ranks and not independent else []),
            "dp_size": 1 if independent else dp,
            "kv_port": group_bounds(base_kv, tp, pp, pcp, slot[0]).first if independent else base_kv,
            "port_rank_start": 0 if independent else slot[0],
            "tp": tp,
            "pp": pp,
            "pcp": pcp,
            "parallel_args": [],
            "model_kind": "moe" if model_kind == "unknown" else model_kind,
            "runtime": runtime,
            "container": "vllm-pd-%s" % name if runtime == "container" else None,
            "container_engine": container_engine,
            "container_image": container_image,
        })
        used += count
    return out


def pd_instances(kind, tp_size, dp_size=1, dp_ranks=None, api_port=0, devices=None, hostname="this host",
                 runtime="systemd", container_engine="podman", container_image="", kv_port=0, model_kind="moe",
                 pp_size=None, pcp_size=None, extra_args=None, dense_keeps_rank=False):
    hostname = hostname or "this host"
    try:
        try:
            sizes = side_sizes(kind, extra_args or [], pp_size, pcp_size)
        except ValueError as exc:
            raise ValueError("host %s: %s" % (hostname, exc))
        out = engine_instances(kind, tp_size, dp_size, dp_ranks, api_port, devices, hostname,
                               runtime, container_engine, container_image, kv_port, model_kind,
                               pp_size=sizes["pp"], pcp_size=sizes["pcp"], dense_keeps_rank=bool(dense_keeps_rank))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))
    for instance in out:
        instance["parallel_args"] = list(sizes["args"])
    return out


def group_ports(instance):
    """The ports an instance's engine binds (only a prefill one binds), in worker order (port_group.port_group:
    kv_port + (port rank) * tp*pp*pcp + (pp_rank*pcp + pcp_rank)*tp + tp_rank); pp and pcp default to 1."""
    return instance_ports(instance)


def pd_group_text(instance):
    """One line for people: the instance, its kv_port and its group per the plan."""
    ports = group_ports(instance)
    return "%s (%s, %s model): kv_port %s, tp %s, pp %s, pcp %s, DP rank in the port formula %s -> group %d-%d" % (
        instance["name"], instance["unit"], instance.get("model_kind", "moe"), instance["kv_port"], instance["tp"],
        instance.get("pp", 1), instance.get("pcp", 1), instance["port_rank_start"], min(ports), max(ports))


class FilterModule(object):
    def filters(self):
        return {"pd_instances": pd_instances, "pd_group_text": pd_group_text, "pd_group_ports": group_ports}
