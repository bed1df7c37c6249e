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
kv_port + rank * w .. + w - 1 for each rank it serves, w = tp*pp*pcp (the same ports for a dense model, whose
independent instances get kv_port + R * w with rank 0 in the formula). The reserved windows belong
to the ports stage: port_windows.reserved_windows of the host's engine environment, the function the
preflight, the start guard and the doctor call too.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_windows import ADXL_PORTS_PER_NPU
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_formula import group_bounds

CHECK = 'MonitoringPortCollision'
VARIABLE = 'vllm_pd_monitoring_ports'
DEFAULT_MONITORING_PORTS = (3000, 9090, 9100, 8082)
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


def engine_taken(kind, kv_port, tp, dp, ranks, api_port, dp_rpc_port=None, pp=1, pcp=1):
    """What one kind's instances take on a host: [(lo, hi, what, fix)]. Only a prefill instance binds
    its kv_port group (the decode side connects to it): tp*pp*pcp ports per DP rank."""
    slots = [(r, [r]) for r in ranks] if ranks else [(None, list(range(dp)))]
    out = []
    for index, (rank, served) in enumerate(slots):
        name = kind if rank is None else '%s-dp%d' % (kind, rank)
        if kind == 'prefill':
            lo, hi = group_bounds(kv_port, tp, pp, pcp, served[0], len(served))[:2]
            sizes = 'tp %d' % tp + (', pp %d' % pp if pp > 1 else '') + (', pcp %d' % pcp if pcp > 1 else '')
            out.append((lo, hi, 'the kv_port group %d-%d of instance %s (vllm_pd_kv_port=%d, %s, '
                        'DP rank(s) %s)' % (lo, hi, name, kv_port, sizes, ranks_text(served)),
                        'or move vllm_pd_kv_port so the group avoids it'))
        port = api_port + index
        out.append((port, port, 'the API port %d of instance %s (%s_api_port)' % (port, name, kind),
                    'or change %s_api_port' % kind))
    if dp_rpc_port and 0 in ranks:
        var = 'vllm_pd_%s_dp_rpc_port' % kind
        out.append((dp_rpc_port, dp_rpc_port, 'the DP RPC port %d of %s DP rank 0 (%s)' % (dp_rpc_port, kind, var),
                    'or change %s' % var))
    return out


def windows_taken(windows):
    """The windows an engine host keeps for the Ascend transports: WINDOWS is port_windows.reserved_windows of the
    host's engine environment (the preflight's and the start guard's function)."""
    te, hccl = tuple(windows['te_rpc']), tuple(windows['hccl'])
    out = [(te[0], te[1], 'the Mooncake Transfer Engine RPC range %d-%d (MC_MIN_RPC_PORT-MC_MAX_RPC_PORT)' % te, ''),
           (hccl[0], hccl[1], 'the HCCL port range %d-%d (HCCL_IF_BASE_PORT)' % hccl, '')]
    if windows['adxl']:
        lo, hi = windows['adxl']
        out.insert(0, (lo, hi, 'the AscendDirectTransport (ADXL) window %d-%d (ASCEND_BASE_PORT %d + %d per NPU)'
                       % (lo, hi, windows['ascend_base_port'], ADXL_PORTS_PER_NPU), ''))
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
