# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Port-group arithmetic and the reserved windows a kv_port group must avoid.

Pure functions only: text in, data out; data in, findings out.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.membership import cluster_hosts
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_formula import group_bounds
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_windows import (
    format_port_list, merge_ranges, ports_to_ranges, span, window_overlaps,
)

# The windows a group must avoid (ADXL, Transfer Engine RPC, HCCL) are decided in common/port_windows.py.
DEFAULT_EPHEMERAL_RANGE = (32768, 60999)


def port_group(kv_port, tp_size=1, pp_size=1, pcp_size=1, dp_rank_start=0, dp_size_local=1):
    """Ports vllm-ascend's MooncakeConnectorV1 binds on a producer node, in worker order: every port of
    common/port_formula.py's group_bounds (the formula and its sources are there)."""
    bounds = group_bounds(kv_port, tp_size, pp_size, pcp_size, dp_rank_start, dp_size_local)
    return list(range(bounds.first, bounds.last + 1))


def instance_ports(instance):
    """port_group() of a planned instance (pd_instances: kv_port, tp, pp, pcp, port_rank_start, dp_size_local; pp and
    pcp default to 1)."""
    return port_group(int(instance["kv_port"]), int(instance["tp"]), int(instance.get("pp", 1)),
                      int(instance.get("pcp", 1)), int(instance["port_rank_start"]), int(instance["dp_size_local"]))


def api_port_checks(instances, active):
    """The API port of each planned instance (INSTANCES: {prefill: [...], decode: [...]}) whose unit is not in ACTIVE
    (running units keep theirs), prefill first: {what, port, var} for the is-it-free check."""
    return [{'what': '%s API' % i['name'], 'port': i['api_port'], 'var': kind + '_api_port'}
            for kind in ('prefill', 'decode') for i in instances[kind] if i['unit'] not in active]


def prefill_groups(groups, hostvars, cluster):
    """The port group of every prefill instance of CLUSTER, as a decode host proves it reaches them
    (kv_port_group state=reachable): GROUPS the inventory groups (vllm_pd_prefill's order is kept), HOSTVARS
    maps a host to its variables (vllm_pd_cluster, vllm_pd_state, vllm_pd_address, vllm_pd_instances);
    retiring hosts (vllm_pd_state: absent) are left out. -> [{host, unit, address, kv_port, tp_size, pp_size,
    pcp_size, dp_rank_start, dp_size_local}]. ValueError names a prefill host this run did not plan."""
    out = []
    for host in cluster_hosts(groups, hostvars, cluster, 'prefill'):
        variables = hostvars[host]
        if variables.get('vllm_pd_state', 'present') == 'absent':
            continue
        if 'vllm_pd_instances' not in variables or 'vllm_pd_address' not in variables:
            raise ValueError(
                'cluster %s: the decode side needs the port groups of prefill host %s, which this run did not plan (it '
                'is outside --limit, or not in the play). Fix: run on the whole cluster (--limit cluster_%s), or put '
                '%s in the play before the decode role.' % (cluster, host, cluster, host))
        for i in variables['vllm_pd_instances']['prefill']:
            out.append({'host': host, 'unit': i['unit'], 'address': variables['vllm_pd_address']['address'],
                        'kv_port': i['kv_port'], 'tp_size': i['tp'], 'pp_size': i.get('pp', 1), 'pcp_size': i.get('pcp', 1),
                        'dp_rank_start': i['port_rank_start'], 'dp_size_local': i['dp_size_local']})
    return out


def parse_port_list(text):
    """Parse a kernel port list ('8080,9000-9010') into sorted (lo, hi) ranges."""
    ranges = []
    for item in re.split(r'[,\s]+', (text or '').strip()):
        if not item:
            continue
        if '-' in item:
            lo, hi = item.split('-', 1)
            lo, hi = int(lo), int(hi)
        else:
            lo = hi = int(item)
        if lo > hi:
            lo, hi = hi, lo
        ranges.append((lo, hi))
    return merge_ranges(ranges)


def parse_local_port_range(text):
    """Parse /proc/sys/net/ipv4/ip_local_port_range ('32768\\t60999')."""
    parts = (text or '').split()
    if len(parts) != 2:
        raise ValueError('cannot parse ip_local_port_range %r' % text)
    return int(parts[0]), int(parts[1])


def in_ranges(port, ranges):
    return any(lo <= port <= hi for lo, hi in ranges)


def read_sysctl_ranges(proc_root='/proc'):
    """Return (ephemeral (lo, hi), reserved [(lo, hi)]) of the module's netns."""
    base = os.path.join(proc_root, 'sys', 'net', 'ipv4')
    try:
        with open(os.path.join(base, 'ip_local_port_range')) as f:
            ephemeral = parse_local_port_range(f.read())
    except (IOError, OSError, ValueError):
        ephemeral = DEFAULT_EPHEMERAL_RANGE
    try:
        with open(os.path.join(base, 'ip_local_reserved_ports')) as f:
            reserved = parse_port_list(f.read())
    except (IOError, OSError, ValueError):
        reserved = []
    return ephemeral, reserved


def detect_npu_count(dev_root='/dev'):
    """Count /dev/davinciN device nodes (not davinci_manager)."""
    return len([p for p in glob.glob(os.path.join(dev_root, 'davinci[0-9]*'))
                if re.match(r'^davinci\d+$', os.path.basename(p))])


def range_findings(ports, windows, ephemeral=None, reserved=None, extra_reserved=None):
    """Static checks of a port group (no sockets involved).

    windows: port_windows.window_checks (check_name, label, (lo, hi) or None, hint)
    ephemeral: (lo, hi) of ip_local_port_range; reserved: [(lo, hi)].
    extra_reserved: [(lo, hi)] of API/proxy ports that must not be in the group.
    Returns a list of finding dicts {check, ports, msg}.
    """
    findings = []
    bad = [p for p in ports if not 1024 <= p <= 65535]
    if bad:
        findings.append(dict(
            check='PortRange', ports=bad,
            msg='port(s) %s of the group are outside 1024-65535; pick a kv_port so that the whole '
                'group %s fits (e.g. kv_port >= 28000 with 8 NPUs)' % (span(bad), span(ports))))
    findings += window_overlaps(ports, windows)
    if extra_reserved:
        hit = [p for p in ports if in_ranges(p, extra_reserved)]
        if hit:
            findings.append(dict(
                check='ReservedPort', ports=hit,
                msg='port(s) %s of the group are reserved for other vLLM PD services (API/proxy: %s); '
                    'move kv_port or those services' % (span(hit), format_port_list(extra_reserved))))
    if ephemeral:
        lo, hi = ephemeral
        hit = [p for p in ports if lo <= p <= hi and not in_ranges(p, reserved or [])]
        if hit:
            wanted = merge_ranges(list(reserved or []) + ports_to_ranges(hit))
            line = 'net.ipv4.ip_local_reserved_ports = %s' % format_port_list(wanted)
            findings.append(dict(
                check='EphemeralRange', ports=hit, window=[lo, hi], sysctl=line,
                msg='port(s) %s of the group lie in the kernel ephemeral range %d-%d '
                    '(net.ipv4.ip_local_port_range) and are not reserved, so any outbound connection '
                    'may take them; add "%s" to /etc/sysctl.d (or set reserve_ephemeral=true), '
                    'or pick a kv_port below %d' % (span(hit), lo, hi, line, lo)))
    return findings


def reserved_with(reserved, ports):
    """Reserved ranges after adding ports, and whether that changes anything."""
    new = merge_ranges(list(reserved) + ports_to_ranges(ports))
    return new, new != merge_ranges(reserved)
