# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of ports and windows: the windows the engine env moves, the ports and NPUs of everything one host
runs (the group by common/port_formula.py), and the monitoring ports against them (monitoring_ports.py).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_formula import group_bounds
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_windows import (
    DEFAULT_NPU_COUNT, HCCL_PORTS, WINDOW_ENV, reserved_windows, window_checks, window_overlaps,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import monitoring_ports as M
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_parallel import _pp_pcp
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_proxy import front_metrics_port
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_view import (
    DEFAULT_API_PORT, DEFAULT_DP_RPC_PORT, DEFAULT_PROXY_PORT, KINDS, _engine_env, _is_port, _ranks, hfind, show,
)


def rule_port_windows(view):
    """The windows the engine env moves (ASCEND_BASE_PORT, MC_MIN/MAX_RPC_PORT, HCCL_IF_BASE_PORT) must make sense
    together: the preflight, the start guard and the doctor read them with port_windows.reserved_windows."""
    for h in view.hosts:
        for kind in view.kinds(h):
            var, env = _engine_env(view, h, kind)
            if not all(_is_port(env[k]) for k in WINDOW_ENV if k in env):
                continue  # a value that is not a port: rule_engine_env
            try:
                reserved_windows(env, 0)
            except ValueError as exc:
                yield hfind(view, h, var, "%s: %s" % (var, exc), "keep MC_MIN_RPC_PORT at or below MC_MAX_RPC_PORT "
                            "and HCCL_IF_BASE_PORT at or below %d" % (65536 - HCCL_PORTS))


def rule_host_layout(view):
    """Ports and NPUs of everything one host runs must not collide (several roles on one host)."""
    for h in view.hosts:
        kv = view.int_of(h, "prefill_kv_port") if view.has(h, "prefill_kv_port") else view.int_of(h, "vllm_pd_kv_port")
        p_tp, d_tp = view.int_of(h, "vllm_pd_prefill_tp_size"), view.int_of(h, "vllm_pd_decode_tp_size")
        dps = dict((k, view.int_of(h, "vllm_pd_%s_dp_size" % k, 1)) for k in KINDS)
        if not all(x for x in (kv, p_tp, d_tp, dps["prefill"], dps["decode"])):
            continue  # missing or not a number: reported by rule_required / rule_numbers
        tps = {"prefill": p_tp, "decode": d_tp}
        # a DP rank takes tp*pp*pcp ports of the group and as many NPUs (bad sizes: rule_parallel_sizes)
        sizes = dict((k, (tps[k],) + _pp_pcp(view, h, k)) for k in KINDS)
        ext, served = {}, {}
        for kind in KINDS:
            dp = dps[kind]
            var = "vllm_pd_%s_dp_ranks" % kind
            raw = view.get(h, var, [])
            ranks = _ranks(raw)
            if ranks is None:
                yield hfind(view, h, var, "%s=%s must be a list of DP ranks, e.g. [0, 1]" % (var, show(raw)),
                            "write the ranks this host serves as a YAML list")
                ranks = []
            if len(set(ranks)) != len(ranks):
                yield hfind(view, h, var, "%s=%s lists a rank twice" % (var, ranks), "list each rank once")
            if [r for r in ranks if r >= dp]:
                yield hfind(view, h, var, "%s=%s has rank(s) outside 0-%d (vllm_pd_%s_dp_size=%d)"
                            % (var, ranks, dp - 1, kind, dp), "use ranks below the DP size")
            uniq = []
            for r in ranks:
                if r not in uniq:
                    uniq.append(r)
            ext[kind] = uniq
            served[kind] = uniq or list(range(dp))
        first, last = min(served["prefill"]), max(served["prefill"])
        lo, hi = group_bounds(kv, *sizes["prefill"], dp_rank_start=first, dp_size_local=last - first + 1)[:2]
        ports = []
        for kind in view.kinds(h):
            base = view.int_of(h, kind + "_api_port", DEFAULT_API_PORT[kind])
            for k in range(max(len(ext[kind]), 1)):
                ports.append((kind + "_api_port" + (" + %d" % k if k else ""), (base or 0) + k))
            if 0 in ext[kind]:
                var = "vllm_pd_%s_dp_rpc_port" % kind
                ports.append((var, view.int_of(h, var, DEFAULT_DP_RPC_PORT[kind]) or 0))
        if h in view.prefill and (lo < 1024 or hi > 65535):
            yield hfind(view, h, "vllm_pd_kv_port", "the prefill port group %d-%d (vllm_pd_kv_port + dp_rank*tp*pp*pcp "
                        ".. + tp*pp*pcp-1) leaves 1024-65535" % (lo, hi),
                        "choose vllm_pd_kv_port so the whole group fits")
        if h in view.proxy:
            ports.append(("vllm_pd_proxy_port", view.int_of(h, "vllm_pd_proxy_port", DEFAULT_PROXY_PORT) or 0))
            mvar, _raw, metrics = front_metrics_port(view, h)
            if metrics:
                ports.append((mvar, metrics))
        seen = {}
        for name, port in ports:
            if port < 1:
                continue  # not a number: rule_numbers
            if port > 65535:
                yield hfind(view, h, name.split(" ")[0], "%s=%d is outside the TCP ports 1-65535" % (name, port),
                            "choose a lower port")
            for group_rank in served["prefill"] if h in view.prefill else []:
                start, end = group_bounds(kv, *sizes["prefill"], dp_rank_start=group_rank)[:2]
                if start <= port <= end:
                    yield hfind(view, h, name.split(" ")[0], "%s=%d lies inside the prefill port group of DP rank %d "
                                "(%d-%d)" % (name, port, group_rank, start, end), "move %s or vllm_pd_kv_port" % name)
            if port in seen:
                yield hfind(view, h, name.split(" ")[0], "%s and %s are both %d on one host" % (seen[port], name, port),
                            "give each a port of its own")
            seen[port] = name
        devs = {}
        for kind in view.kinds(h):
            raw = view.get(h, kind + "_devices", [])
            ids = _ranks(raw)
            if ids is None:
                yield hfind(view, h, kind + "_devices", "%s_devices=%s must be a list of NPU ids, e.g. [0, 1]"
                            % (kind, show(raw)), "write the NPU ids as a YAML list of numbers")
                continue
            need = group_bounds(0, *sizes[kind], dp_size_local=len(served[kind])).size
            devs[kind] = (ids or list(range(need)), need)
        if "prefill" in devs and "decode" in devs:
            shared = [d for d in devs["prefill"][0] if d in devs["decode"][0]]
            if shared:
                yield hfind(view, h, "prefill_devices", "prefill and decode on one host share NPUs %s"
                            % ",".join(str(d) for d in shared),
                            "set prefill_devices and decode_devices to disjoint lists")
        npus = view.int_of(h, "vllm_pd_npu_count")
        for kind in KINDS:
            if kind not in devs or not devs[kind][0]:
                continue
            ids, need = devs[kind]
            if len(ids) != need:
                yield hfind(view, h, kind + "_devices", "%s_devices has %d NPU ids but tp*pp*pcp x the DP ranks this "
                            "host serves is %d" % (kind, len(ids), need), "list exactly %d ids" % need)
            if npus and max(ids) >= npus:
                yield hfind(view, h, kind + "_devices", "%s uses NPU %d but the host has vllm_pd_npu_count=%d "
                            "(ids 0-%d)" % (kind, max(ids), npus, npus - 1),
                            "lower tp/dp or set %s_devices" % kind)


def _npus_at_least(view, h, served):
    """The fewest NPUs host H can have: those its instances use (tp*pp*pcp per DP rank it serves, P and D apart)
    and those its *_devices lists name."""
    used, highest = 0, -1
    for kind in view.kinds(h):
        tp = view.int_of(h, "vllm_pd_%s_tp_size" % kind) or 1
        used += group_bounds(0, tp, *_pp_pcp(view, h, kind), dp_size_local=len(served[kind])).size
        ids = _ranks(view.get(h, kind + "_devices", [])) or []
        highest = max([highest] + ids)
    return max(used, highest + 1)


def rule_group_windows(view):
    """A prefill port group inside a window the Ascend transports bind from needs no host fact: it is named here,
    before any host is contacted, with the findings (and check names, so vllm_pd_ignore_checks applies) of the
    preflight's kv_port_group check (port_windows.window_checks). The ADXL window's width counts
    vllm_pd_npu_count NPUs, else the fewest the host can have (_npus_at_least): the preflight reads the host's own
    NPUs, which can only widen it."""
    for h in view.prefill:
        if view.get(h, "vllm_pd_state", "present") == "absent":
            continue
        kv_var = "prefill_kv_port" if view.has(h, "prefill_kv_port") else "vllm_pd_kv_port"
        kv = view.int_of(h, kv_var)
        served = {}
        for kind in view.kinds(h):
            dp = view.int_of(h, "vllm_pd_%s_dp_size" % kind, 1)
            ranks = _ranks(view.get(h, "vllm_pd_%s_dp_ranks" % kind, []))
            served[kind] = sorted(set(ranks or [])) or list(range(dp or 1))
        tp = view.int_of(h, "vllm_pd_prefill_tp_size")
        if not kv or not tp:
            continue  # missing or not a number: rule_required / rule_numbers
        counted = view.int_of(h, "vllm_pd_npu_count")
        npus = counted or _npus_at_least(view, h, served)
        env_var, _env = _engine_env(view, h, "prefill")
        windows = _windows(view, h, "prefill", npus)
        if windows is None:
            continue  # a window value that is not a port: rule_engine_env, rule_port_windows
        ports = []
        for rank in served["prefill"]:
            lo, hi = group_bounds(kv, tp, *_pp_pcp(view, h, "prefill"), dp_rank_start=rank)[:2]
            ports += [p for p in range(lo, hi + 1) if p not in ports]
        for f in window_overlaps(ports, window_checks(windows["adxl"], windows["te_rpc"], windows["hccl"])):
            counts = "" if counted or f["check"] != "AdxlWindow" else (
                " (the window counts %d NPUs, the fewest this host's instances use: set vllm_pd_npu_count to the "
                "host's NPUs for the whole window)" % npus)
            yield hfind(view, h, kv_var, "[%s] %s%s" % (f["check"], f["msg"], counts),
                        "choose %s so the whole group lies outside the window, or move the window in %s"
                        % (kv_var, env_var), f["check"])


def _windows(view, h, kind, npus):
    """port_windows.reserved_windows of KIND's engine env on H (None when a value is bad: rule_engine_env says so)."""
    try:
        return reserved_windows(_engine_env(view, h, kind)[1], npus)
    except ValueError:
        return None


def rule_monitoring_ports(view):
    """The operator's monitoring ports stay out of every group, API/proxy port and reserved window of
    the host (monitoring_ports.py); values that are not numbers are rule_numbers' findings."""
    for h in view.hosts:
        raw = view.get(h, M.VARIABLE, list(M.DEFAULT_MONITORING_PORTS))
        monitoring, why = M.parse_ports(raw)
        if why:
            yield hfind(view, h, M.VARIABLE, why, "write a YAML list of the ports your monitoring services listen on")
            continue
        taken = []
        kinds = view.kinds(h)
        for kind in kinds:
            kv = view.int_of(h, "prefill_kv_port") if view.has(h, "prefill_kv_port") else view.int_of(h, "vllm_pd_kv_port")
            tp, dp = view.int_of(h, "vllm_pd_%s_tp_size" % kind), view.int_of(h, "vllm_pd_%s_dp_size" % kind, 1)
            ranks = _ranks(view.get(h, "vllm_pd_%s_dp_ranks" % kind, []))
            api = view.int_of(h, kind + "_api_port", DEFAULT_API_PORT[kind])
            rpc = view.int_of(h, "vllm_pd_%s_dp_rpc_port" % kind, DEFAULT_DP_RPC_PORT[kind])
            if not all((kv, tp, dp, api)) or ranks is None:
                continue
            pp, pcp = _pp_pcp(view, h, kind)
            taken += M.engine_taken(kind, kv, tp, dp, sorted(set(ranks)), api, rpc, pp=pp, pcp=pcp)
        npus = view.int_of(h, "vllm_pd_npu_count", DEFAULT_NPU_COUNT) or DEFAULT_NPU_COUNT
        for kind in kinds:
            win = _windows(view, h, kind, npus)
            for t in M.windows_taken(win) if win else []:
                if t not in taken:
                    taken.append(t)
        if h in view.proxy:
            port = view.int_of(h, "vllm_pd_proxy_port", DEFAULT_PROXY_PORT)
            if port:
                taken.append((port, port, "the proxy port %d (vllm_pd_proxy_port)" % port, "or change vllm_pd_proxy_port"))
            mvar, _raw, metrics = front_metrics_port(view, h)
            if metrics:
                taken.append((metrics, metrics, "HAProxy's Prometheus exporter port %d (%s)" % (metrics, mvar),
                              "or change %s" % mvar))
        for _port, message, fix in M.collisions(monitoring, taken):
            yield hfind(view, h, M.VARIABLE, message, fix, M.CHECK)
