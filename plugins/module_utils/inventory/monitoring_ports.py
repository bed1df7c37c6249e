# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator's monitoring ports against every port the PD plan takes on a host (issue 22).

A Grafana, Prometheus or exporter listening inside a kv_port group makes the prefill engine fail to
bind at startup (the field report's Grafana on a group port); one on an API or proxy port, or in a
window the Ascend transports bind from (ADXL, Transfer Engine RPC, HCCL), fails the same way later.
Defaults: Grafana 3000, Prometheus 9090, node_exporter 9100, npu-exporter 8082
(shared/docs/observability-bench.md §B5, §B6, §B7).

Pure functions: inventory values in, (port, collision) pairs out. The instances follow
plugins/filter/pd_instances.py: internal DP is one instance serving ranks 0..dp-1, external DP one
instance per listed rank, API port + its index on the host; a prefill instance binds
kv_port + rank * tp .. + tp - 1 for each rank it serves (the same ports for a dense model, whose
independent instances get kv_port + R * tp with rank 0 in the formula). The reserved windows belong
to the ports stage (ports/port_group.py, which kv_port_group checks against): filter
pd_inventory_errors hands them in as WINDOWS.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

CHECK = 'MonitoringPortCollision'
VARIABLE = 'vllm_pd_monitoring_ports'
DEFAULT_MONITORING_PORTS = (3000, 9090, 9100, 8082)
# WINDOWS: {"ascend_base_port": default ADXL start, "adxl_ports_per_npu", "npu_count": default NPUs,
# "te_rpc": [lo, hi], "hccl": [lo, hi]}
KNOWN = {3000: 'Grafana', 9090: 'Prometheus', 9100: 'node_exporter', 8082: 'npu-exporter'}


def parse_ports(raw):
    """(ports, None) for a list of ports 1-65535 (ints or digit strings), else (None, why)."""
    if not isinstance(raw, (list, tuple)):
        return None, '%s=%r must be a list of TCP ports, e.g. [3000, 9090, 9100, 8082]' % (VARIABLE, raw)
    out = []
    for i, p in enumerate(raw):
        n = p if isinstance(p, int) and not isinstance(p, bool) else (int(p) if isinstance(p, str) and p.isdigit() else None)
        if n is None or not 1 <= n <= 65535:
            return None, '%s[%d]=%r is not a TCP port 1-65535' % (VARIABLE, i, p)
        if n not in out:
            out.append(n)
    return out, None


def label(port):
    return '%d (%s)' % (port, KNOWN[port]) if port in KNOWN else str(port)


def ranks_text(ranks):
    """[0, 1, 2] -> '0-2', [3] -> '3' (the ranks an instance serves are consecutive)."""
    return str(ranks[0]) if len(ranks) == 1 else '%d-%d' % (ranks[0], ranks[-1])


def engine_taken(kind, kv_port, tp, dp, ranks, api_port, dp_rpc_port=None):
    """What one kind's instances take on a host: [(lo, hi, what, fix)]. Only a prefill instance binds
    its kv_port group (the decode side connects to it)."""
    slots = [(r, [r]) for r in ranks] if ranks else [(None, list(range(dp)))]
    out = []
    for index, (rank, served) in enumerate(slots):
        name = kind if rank is None else '%s-dp%d' % (kind, rank)
        if kind == 'prefill':
            lo, hi = kv_port + served[0] * tp, kv_port + (served[-1] + 1) * tp - 1
            out.append((lo, hi, 'the kv_port group %d-%d of instance %s (vllm_pd_kv_port=%d, tp %d, '
                        'DP rank(s) %s)' % (lo, hi, name, kv_port, tp, ranks_text(served)),
                        'or move vllm_pd_kv_port so the group avoids it'))
        port = api_port + index
        out.append((port, port, 'the API port %d of instance %s (%s_api_port)' % (port, name, kind),
                    'or change %s_api_port' % kind))
    if dp_rpc_port and 0 in ranks:
        var = 'vllm_pd_%s_dp_rpc_port' % kind
        out.append((dp_rpc_port, dp_rpc_port, 'the DP RPC port %d of %s DP rank 0 (%s)' % (dp_rpc_port, kind, var),
                    'or change %s' % var))
    return out


def windows_taken(windows, npu_count, ascend_base_port):
    """The windows every engine host keeps for the Ascend transports (WINDOWS, see above)."""
    te, hccl = tuple(windows['te_rpc']), tuple(windows['hccl'])
    out = [(te[0], te[1], 'the Mooncake Transfer Engine RPC range %d-%d' % te, ''),
           (hccl[0], hccl[1], 'the HCCL port range %d-%d' % hccl, '')]
    if npu_count > 0:
        hi = ascend_base_port + windows['adxl_ports_per_npu'] * npu_count - 1
        out.insert(0, (ascend_base_port, hi, 'the AscendDirectTransport (ADXL) window %d-%d (ASCEND_BASE_PORT %d + '
                       '%d per NPU, %d NPUs)' % (ascend_base_port, hi, ascend_base_port, windows['adxl_ports_per_npu'],
                                                 npu_count), ''))
    return out


def collisions(monitoring, taken):
    """[(port, message, fix)] for each monitoring port inside something TAKEN ([(lo, hi, what, fix)])."""
    out = []
    for port in monitoring:
        for lo, hi, what, fix in taken:
            if lo <= port <= hi:
                out.append((port, 'monitoring port %s (%s) collides with %s [%s]' % (label(port), VARIABLE, what, CHECK),
                            'run the monitoring service on a port outside it and list that port in %s%s'
                            % (VARIABLE, ', ' + fix if fix else '')))
    return out
