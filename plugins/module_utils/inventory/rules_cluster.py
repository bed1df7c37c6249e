# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the inventory's shape: the PD groups, cluster names and cluster groups, one inventory host per
machine, the required variables and the numbers, both sides in each cluster and what its hosts must agree on.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_view import Finding, as_int, hfind, show

ROLLOUTS = ("parallel", "serial", "canary", "rolling")
# Whole numbers >= 1; the ports also <= 65535.
PORT_VARS = ("vllm_pd_kv_port", "prefill_kv_port", "vllm_pd_decode_kv_port", "decode_kv_port",
             "prefill_api_port", "decode_api_port", "vllm_pd_proxy_port",
             "vllm_pd_prefill_dp_rpc_port", "vllm_pd_decode_dp_rpc_port")
COUNT_VARS = ("vllm_pd_prefill_tp_size", "vllm_pd_decode_tp_size", "vllm_pd_prefill_dp_size",
              "vllm_pd_decode_dp_size", "vllm_pd_prefill_pp_size", "vllm_pd_prefill_pcp_size",
              "vllm_pd_decode_pp_size", "vllm_pd_decode_pcp_size", "vllm_pd_npu_count", "vllm_pd_abort_request_timeout",
              "vllm_pd_ready_timeout")
# Whole numbers of seconds where 0 means "off".
SECONDS_VARS = ("vllm_pd_shutdown_timeout", "prefill_shutdown_timeout", "decode_shutdown_timeout")
CONNECTION_VARS = ("ansible_host", "ansible_port", "ansible_connection", "ansible_ssh_port")


def rule_groups(view):
    if not view.prefill and not view.decode:
        yield Finding("*", "", "vllm_pd_prefill", "no hosts in groups vllm_pd_prefill / vllm_pd_decode",
                      "add them to the inventory")
    if view.rollout not in ROLLOUTS:
        yield Finding("*", "", "vllm_pd_rollout", "vllm_pd_rollout=%s is not one of %s"
                      % (show(view.rollout), ", ".join(ROLLOUTS)), "set it to one of them")


def rule_unevaluable(view):
    for host, var, why in view.broken:
        yield hfind(view, host, var, "%s cannot be evaluated (%s)" % (var, why),
                    "correct the variable or the template it refers to")


def rule_cluster_name(view):
    for h in view.hosts:
        v = view.get(h, "vllm_pd_cluster")
        if v is None or v == "":
            yield Finding("*", h, "vllm_pd_cluster", "vllm_pd_cluster is not set",
                          "put the host in a cluster group whose vars set vllm_pd_cluster")
        elif not view.cluster_of(h):
            yield Finding("*", h, "vllm_pd_cluster", "vllm_pd_cluster=%r is not a cluster name (letters, digits, "
                          "'.', '_', '-'; it names units and groups)" % (v,),
                          "rename the cluster, e.g. vllm_pd_cluster: a")


def rule_cluster_groups(view):
    """One host in two cluster_* groups (one vllm_pd_cluster wins silently), or a cluster_* group
    whose hosts disagree on vllm_pd_cluster."""
    cgroups = sorted(g for g in view.groups if g.startswith("cluster_"))
    for h in view.hosts:
        mine = [g for g in cgroups if h in view.groups[g]]
        if len(mine) > 1:
            yield Finding("*", h, "vllm_pd_cluster", "the host is in %d cluster groups (%s); ansible keeps one "
                          "vllm_pd_cluster=%s and one unit path for two configurations"
                          % (len(mine), ", ".join(mine), show(view.get(h, "vllm_pd_cluster"))),
                          "put the host in one cluster group only (one machine serves one cluster)")
    for g in cgroups:
        members = [h for h in view.groups[g] if h in view.hosts]
        values = {}
        for h in members:
            values.setdefault(str(view.get(h, "vllm_pd_cluster")), []).append(h)
        if len(values) > 1:
            yield Finding("*", "", "vllm_pd_cluster", "the hosts of group %s have different vllm_pd_cluster (%s)"
                          % (g, "; ".join("%s=%s" % (v, ",".join(hs)) for v, hs in sorted(values.items()))),
                          "set vllm_pd_cluster once in the group's vars, not per host")


def _machine(view, h):
    conn = str(view.get(h, "ansible_connection", "") or "")
    if conn == "local":
        return ("local",)
    addr = str(view.get(h, "ansible_host", h) or h)
    port = view.get(h, "ansible_port", view.get(h, "ansible_ssh_port", 22))
    return (conn or "ssh", addr, str(as_int(port) if as_int(port) is not None else port))


def rule_same_machine(view):
    """Two inventory hosts that reach one machine would write the same unit paths."""
    seen = {}
    for h in view.hosts:
        seen.setdefault(_machine(view, h), []).append(h)
    for key, hs in sorted(seen.items()):
        if len(hs) < 2:
            continue
        where = "ansible_host=%s port %s" % (key[1], key[2]) if len(key) == 3 else "ansible_connection=local"
        for c in sorted(set(view.key(h) for h in hs)):
            yield Finding(c, ", ".join(hs), "ansible_host", "inventory hosts %s are the same machine (%s): their "
                          "units and env files would overwrite each other" % (" and ".join(hs), where),
                          "keep one inventory host per machine; several roles on one machine are one host in "
                          "several groups (vllm_pd_prefill and vllm_pd_decode)")


def rule_required(view):
    for h in view.hosts:
        for var in ("vllm_pd_model", "vllm_pd_kv_port", "vllm_pd_prefill_tp_size", "vllm_pd_decode_tp_size"):
            if not view.has(h, var):
                yield hfind(view, h, var, var + " is not set", "set it in the cluster group vars")
        if not (view.get(h, "vllm_pd_host_ip") or view.get(h, "vllm_pd_network") or view.get(h, "vllm_pd_interface")):
            yield hfind(view, h, "vllm_pd_network", "none of vllm_pd_network, vllm_pd_host_ip, vllm_pd_interface is "
                        "set, so VLLM_HOST_IP cannot be pinned (auto-detection picks the wrong NIC)",
                        "set vllm_pd_network to the inter-node CIDR")


def rule_numbers(view):
    for h in view.hosts:
        for var in PORT_VARS + COUNT_VARS:
            if not view.has(h, var):
                continue
            raw = view.get(h, var)
            n = as_int(raw)
            if n is None or n < 1:
                yield hfind(view, h, var, "%s=%s must be a positive integer" % (var, show(raw)),
                            "write it as a whole number, e.g. %s: %d" % (var, 8000 if var in PORT_VARS else 1))
            elif var in PORT_VARS and n > 65535:
                yield hfind(view, h, var, "%s=%d is outside the TCP ports 1-65535" % (var, n),
                            "choose a port below 65536")
        for var in SECONDS_VARS:
            if view.has(h, var) and as_int(view.get(h, var)) is None:
                yield hfind(view, h, var, "%s=%s must be a whole number of seconds (0 turns it off)"
                            % (var, show(view.get(h, var))), "write it as a whole number, e.g. %s: 60" % var)


def _same(value):
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


def rule_cluster_sides(view):
    for name, members in sorted(view.clusters.items()):
        ps = [h for h in members if h in view.prefill]
        ds = [h for h in members if h in view.decode]
        if not ps or not ds:
            yield Finding(name, "", "vllm_pd_prefill", "needs at least one prefill and one decode host (has P=%s, D=%s)"
                          % (ps, ds), "add the missing side to vllm_pd_prefill / vllm_pd_decode with "
                          "vllm_pd_cluster=%s" % name)


def rule_cluster_agrees(view):
    """P and D of a cluster must launch with the same kv_connector_extra_config and model."""
    for name, members in sorted(view.clusters.items()):
        for var in ("vllm_pd_prefill_tp_size", "vllm_pd_prefill_dp_size", "vllm_pd_decode_tp_size",
                    "vllm_pd_decode_dp_size", "vllm_pd_model", "vllm_pd_kv_connector_extra"):
            values = []
            for h in members:
                v = _same(view.get(h, var, 1))
                if v not in values:
                    values.append(v)
            if len(values) > 1:
                yield Finding(name, "", var, "%s differs between its hosts (%s); P and D must agree on "
                              "kv_connector_extra_config" % (var, ", ".join(values)),
                              "set it once in the cluster group vars")
