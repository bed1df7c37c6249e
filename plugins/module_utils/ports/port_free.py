# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The free check of a kv_port group (before vLLM starts), usable without Ansible.

check_free() is the whole check with plain arguments, for callers outside a module (the engine
units' start guard); run_free() in port_stop.py drives it from the module and stops allowed holders.
Nothing here stops, kills or writes anything.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import params as P
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_checks import (
    blocker_fix, build_holders, describe_holder, normalize_unit, plan_stops, split_holders,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_windows import DEFAULT_ASCEND_BASE_PORT, DEFAULT_NPU_COUNT, adxl_window, window_checks
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import parse_port_list, port_group, range_findings
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.sockets import classify, format_endpoint, is_wildcard

DEFAULT_TE_RPC_RANGE = [15000, 17000]
DEFAULT_HCCL_RANGE = [60000, 60031]


def summarize(findings, head):
    return '%s: %s' % (head, ' | '.join('[%s] %s' % (f['check'], f['msg']) for f in findings))


def public_findings(findings):
    """Findings without bulky holder copies (holders are in busy/listeners)."""
    return [dict((k, v) for k, v in f.items() if k != 'holders') for f in findings]


def misleading_messages(holders, host_ip):
    return ['port %d also listens on %s, not on %s: %s; it does not block vLLM but curl/nc to that '
            'address will answer and mislead' % (h['port'], h['address'], host_ip, describe_holder(h))
            for h in holders]


def snapshot(ops, ports, host_ip):
    """One read of the socket tables and one fd scan -> (blocking holders, misleading holders)."""
    ops.reset()
    socks = ops.sockets(ports)
    blocking, misleading = classify(socks, ports, host_ip)
    owners = ops.owners([s['inode'] for s in blocking + misleading])
    return (build_holders(blocking, owners, ops.process_info),
            build_holders(misleading, owners, ops.process_info))


def listeners_snapshot(ops, ports):
    ops.reset()
    socks = [s for s in ops.sockets(ports) if s['state'] == 'LISTEN']
    owners = ops.owners([s['inode'] for s in socks])
    return build_holders(socks, owners, ops.process_info)


def resolve_npu_count(npu_count, detected):
    """(npu count for the ADXL window, warning or None). npu_count given must be >= 1 (ParamError)."""
    if npu_count is not None:
        return P.as_int('npu_count', npu_count, 1, 4096, 'an NPU count is >= 1; to skip the ADXL check on a host '
                        'without AscendDirectTransport set adxl_window.enabled=false'), None
    if detected:
        return detected, None
    return DEFAULT_NPU_COUNT, ('no /dev/davinciN device found; assuming %d NPUs for the ADXL window '
                               '(set npu_count or adxl_window to override)' % DEFAULT_NPU_COUNT)


def resolve_base_port(ascend_base_port):
    """The ADXL window's start: the value given (the engine environment's ASCEND_BASE_PORT, from
    port_windows.reserved_windows), else Mooncake's default. Never this process's own environment: the
    engine's is what counts, and the caller knows it."""
    if ascend_base_port is not None:
        return P.port('ascend_base_port', ascend_base_port)
    return DEFAULT_ASCEND_BASE_PORT


def resolve_adxl_window(aw, base, npu):
    """The ADXL window (lo, hi) to avoid, or None when switched off (only by enabled=false)."""
    aw = aw or {}
    if aw.get('enabled') is False:
        return None
    start = P.port('adxl_window.start', aw['start']) if aw.get('start') is not None else base
    if aw.get('end') is None:
        return adxl_window(start, npu)
    end = P.port('adxl_window.end', aw['end'])
    if end < start:
        raise P.ParamError('adxl_window', dict(start=start, end=end), 'end must not be below start (an empty '
                           'window would switch the ADXL check off); to skip the check set enabled: false')
    return start, end


def parse_extra_reserved(items):
    extra = []
    for item in items or []:
        try:
            ranges = parse_port_list(str(item))
        except ValueError:
            raise P.ParamError('extra_reserved', item, 'give a port or a range like 9000-9010')
        for lo, hi in ranges:
            if lo < 1 or hi > P.MAX_PORT:
                raise P.ParamError('extra_reserved', item, 'ports are between 1 and 65535')
        extra.extend(ranges)
    return extra


def static_findings(ports, window, te_rpc_range, hccl_range, extra, sysctl_ranges):
    """Findings that need no socket: port range, reserved windows, ephemeral range -> (findings, reserved)."""
    windows = window_checks(window, P.port_range('te_rpc_range', te_rpc_range), P.port_range('hccl_range', hccl_range))
    ephemeral, reserved = sysctl_ranges
    return range_findings(ports, windows, ephemeral, reserved, extra), reserved


def host_ip_finding(ops, host_ip):
    if is_wildcard(host_ip):
        return None
    err = ops.host_ip_local(host_ip)
    if err is None:
        return None
    return dict(check='HostIp', ports=[], msg='host_ip %s is not an address of this host (%s): vLLM would fail '
                'with "Cannot assign requested address"; set VLLM_HOST_IP to this host\'s inter-node IP' % (
                    host_ip, err))


def bound_holders(ops, ports, host_ip, busy):
    """Holders found only by bind(): bound but not listening sockets, invisible in the socket table.

    A port whose bind fails is read again first: a socket that began to listen after the table was read
    (an engine started meanwhile, e.g. by its unit's Restart=) is named by that read with its owner,
    not reported as an invisible holder."""
    seen = set(h['port'] for h in busy)
    refused = [port for port in ports if port not in seen and 1024 <= port <= 65535
               and ops.bind_probe(host_ip, port) == errno.EADDRINUSE]
    if not refused:
        return []
    visible = snapshot(ops, refused, host_ip)[0]
    named = set(h['port'] for h in visible)
    return visible + [dict(port=port, address=host_ip, family='tcp6' if ':' in host_ip else 'tcp',
                           state='BOUND', inode=None, endpoint=format_endpoint(host_ip, port), pids=[],
                           pid=None, process=None, cmdline=None, unit=None, container=None)
                      for port in refused if port not in named]


def main_pid_of(show):
    try:
        return int(show.get('MainPID') or 0) or None
    except ValueError:
        return None


def held_by(ops, h, owner_unit, main_pid, owner_pid, container=None):
    """True when a pid of holder h is in the owner's process tree: its cgroup is owner_unit, or it
    descends from the unit's MainPID or from owner_pid, or it runs in the owner container (its cgroup
    names the container's id, or it descends from the container's init pid)."""
    for pid in h.get('pids') or []:
        if owner_unit and ops.process_info(pid).get('unit') == owner_unit:
            return True
        if main_pid and ops.is_descendant(pid, main_pid):
            return True
        if owner_pid and ops.is_descendant(pid, owner_pid):
            return True
        if container and (ops.process_info(pid).get('container') == container['id']
                          or (container.get('pid') and ops.is_descendant(pid, container['pid']))):
            return True
    return False


def find_owner_container(ops, params):
    """{'id', 'pid', 'name'} of O(owner_container), or None when not given or not there (yet)."""
    name = params['owner_container']
    if not name:
        return None
    for engine in [params['container_engine']] if params['container_engine'] else ['podman', 'docker']:
        found = ops.container_inspect(engine, name)
        if found:
            return found
    return None


def owner_label(params, owner_unit):
    parts = [owner_unit] if owner_unit else []
    if params['owner_container']:
        parts.append('container %s' % params['owner_container'])
    if params['owner_pid']:
        parts.append('pid %s' % params['owner_pid'])
    return ' / '.join(parts)


def owner_predicate(ops, params):
    """holder -> bool for O(owner_unit)/O(owner_container)/O(owner_pid) in state=free, or None when none is given."""
    owner_unit = normalize_unit(params['owner_unit']) if params['owner_unit'] else None
    owner_pid = params['owner_pid']
    if not owner_unit and not owner_pid and not params['owner_container']:
        return None
    main_pid = None
    if owner_unit:
        show = ops.unit_show(owner_unit)
        # not loaded or not queryable: the cgroup match alone still finds its processes
        main_pid = main_pid_of(show) if 'error' not in show else None
    container = find_owner_container(ops, params)
    return lambda h: held_by(ops, h, owner_unit, main_pid, owner_pid, container)


def check_free(kv_port, tp_size=1, dp_rank_start=0, dp_size_local=1, host_ip='0.0.0.0', npu_count=None,
               owner_unit=None, owner_container=None, container_engine=None, owner_pid=None, pp_size=1,
               pcp_size=1, ascend_base_port=None, adxl=None, te_rpc_range=None, hccl_range=None,
               extra_reserved=(), bind_probe=True, ops=None):
    """The free check with plain arguments; stops nothing. Raises params.ParamError for a bad argument.

    Returns {'ports', 'host_ip', 'findings', 'held_by_owner', 'warnings'}: each finding has check, ports,
    msg and fix; a busy port also port, pid, unit, container (one finding per blocking socket).
    """
    if ops is None:
        from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.host_ops import HostOps
        ops = HostOps()
    P.group_sizes(kv_port, tp_size, pp_size, pcp_size, dp_rank_start, dp_size_local)
    host_ip = P.ip_address('host_ip', host_ip, 'give the literal address vLLM binds (VLLM_HOST_IP)')
    ports = port_group(int(kv_port), int(tp_size), int(pp_size), int(pcp_size), int(dp_rank_start),
                       int(dp_size_local))
    warnings = []
    npu, warn = resolve_npu_count(npu_count, ops.npu_count() if npu_count is None else None)
    if warn:
        warnings.append(warn)
    window = resolve_adxl_window(adxl, resolve_base_port(ascend_base_port), npu)
    findings, _reserved = static_findings(
        ports, window, DEFAULT_TE_RPC_RANGE if te_rpc_range is None else te_rpc_range,
        DEFAULT_HCCL_RANGE if hccl_range is None else hccl_range, parse_extra_reserved(extra_reserved),
        ops.sysctl_ranges())
    for f in findings:
        f['fix'] = f['msg']
    hf = host_ip_finding(ops, host_ip)
    if hf:
        hf['fix'] = 'set VLLM_HOST_IP to an address of this host'
        findings.append(hf)
    busy, misleading = snapshot(ops, ports, host_ip)
    if bind_probe and not hf:
        busy.extend(bound_holders(ops, ports, host_ip, busy))
    is_owner = owner_predicate(ops, dict(owner_unit=owner_unit, owner_pid=owner_pid, owner_container=owner_container,
                                         container_engine=container_engine)) if busy else None
    owned, busy = split_holders(busy, is_owner)
    for f in plan_stops(busy, [])[1]:
        for h in f['holders']:
            findings.append(dict(check='PortBusy', ports=[h['port']], port=h['port'], pid=h.get('pid'),
                                 unit=h.get('unit'), container=h.get('container_name') or h.get('container'),
                                 endpoint=h['endpoint'], msg=f['msg'], fix=blocker_fix([h])))
    warnings.extend(misleading_messages(misleading, host_ip))
    return dict(ports=ports, host_ip=host_ip, findings=findings, held_by_owner=owned, warnings=warnings)
