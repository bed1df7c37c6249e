# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kv_port_group state=free: the free check (port_free.py), the stop plan, and carrying it out.

Only units and containers the operator allowed (stop_services) are stopped; they are also kept from
starting again (holders.py decides how, and records what was there before).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import time

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import holders as holders_mod
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import params as P
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_checks import (
    CONTAINER_PREFIX, holder_lines, parse_stop_services, plan_stops, split_holders, stop_target,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_free import (
    bound_holders, host_ip_finding, misleading_messages, owner_predicate, parse_extra_reserved, public_findings,
    resolve_adxl_window, resolve_base_port, resolve_npu_count, snapshot, static_findings, summarize,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import format_port_list, reserved_with, span

POLL = 0.25


def static_checks(module, ops, params, ports, result):
    """Findings of the port arithmetic and the reserved windows; a bad parameter fails the module."""
    try:
        npu, warning = resolve_npu_count(params['npu_count'],
                                         ops.npu_count() if params['npu_count'] is None else None)
        if warning:
            module.warn(warning)
        result['npu_count'] = npu
        window = resolve_adxl_window(params['adxl_window'], resolve_base_port(params['ascend_base_port']), npu)
        result['adxl_window'] = list(window) if window else []
        return static_findings(ports, window, params['te_rpc_range'], params['hccl_range'],
                               parse_extra_reserved(params['extra_reserved']), ops.sysctl_ranges())
    except P.ParamError as e:
        module.fail_json(msg=str(e), **result)


def _stop(module, ops, target, held, engines, result):
    if target.startswith(CONTAINER_PREFIX):
        name = target[len(CONTAINER_PREFIX):]
        rc, err = ops.stop_container(engines[target], name)
        if rc != 0:
            module.fail_json(msg='%s stop %s failed (rc=%d): %s; the container holds port(s) %s of the kv_port '
                                 'group; stop it by hand or pick another kv_port' % (
                                     engines[target], name, rc, (err or '').strip(), held), **result)
        return
    rc, err = ops.stop_unit(target)
    if rc != 0:
        module.fail_json(msg='systemctl stop %s failed (rc=%d): %s; it holds port(s) %s of the kv_port group; '
                             'stop it by hand or pick another kv_port' % (target, rc, (err or '').strip(), held),
                         **result)


def run_free(module, ops, params, ports, host_ip, result):
    try:
        allowed_units, allowed_containers = parse_stop_services(params['stop_services'])
    except ValueError as e:
        module.fail_json(msg='%s; fix vllm_pd_stop_services (write container:NAME for a container)' % e, **result)
    findings, reserved = static_checks(module, ops, params, ports, result)
    hf = host_ip_finding(ops, host_ip)
    if hf:
        findings.append(hf)
    reserve_ports = []
    if params['reserve_ephemeral']:
        keep = []
        for f in findings:
            if f['check'] == 'EphemeralRange':
                reserve_ports.extend(f['ports'])
            else:
                keep.append(f)
        findings = keep
    result['reserved_ports'] = format_port_list(reserved)

    busy, misleading = snapshot(ops, ports, host_ip)
    result['socket_source'] = ops.socket_source
    if params['bind_probe'] and not hf:
        busy.extend(bound_holders(ops, ports, host_ip, busy))
    is_owner = owner_predicate(ops, params) if busy else None
    owned, busy = split_holders(busy, is_owner)
    holders_mod.attach_socket_units(busy, ops.list_sockets)
    result['busy'] = busy
    result['held_by_owner'] = owned
    result['misleading'] = misleading
    for text in misleading_messages(misleading, host_ip):
        module.warn(text)
    to_stop, busy_findings = plan_stops(busy, params['stop_services'])
    findings.extend(busy_findings)
    # vllm_pd_ignore_checks: the operator accepts these; a warning each, no failure
    ignored = params['ignore_checks']
    for f in findings:
        if f['check'] in ignored:
            module.warn('ignored by vllm_pd_ignore_checks: [%s] %s' % (f['check'], f['msg']))
    findings = [f for f in findings if f['check'] not in ignored]
    result['findings'] = public_findings(findings)
    if findings:
        module.fail_json(msg=summarize(findings, 'kv_port group %s on %s is not usable; nothing was stopped or '
                                                 'changed' % (span(ports), host_ip)), **result)

    before = holder_lines(busy)
    after = holder_lines([h for h in busy if stop_target(h, allowed_units, allowed_containers) is None])
    new_reserved, reserve_changes = reserved_with(reserved, reserve_ports) if reserve_ports else (reserved, False)
    engines = dict((stop_target(h, allowed_units, allowed_containers), h.get('container_runtime')) for h in busy)
    result['stopped'] = to_stop
    result['stopped_containers'] = [dict(name=t[len(CONTAINER_PREFIX):], engine=engines[t])
                                    for t in to_stop if t.startswith(CONTAINER_PREFIX)]
    # what was there before, and how each holder is kept off (read before anything changes)
    off = [holders_mod.plan_off(t, engines.get(t), ops) for t in to_stop]
    result['holders_off'] = off
    result['reserved_ports'] = format_port_list(new_reserved)
    result['changed'] = bool(to_stop) or reserve_changes
    if module._diff:
        b = list(before) + holders_mod.state_lines(off, after=False)
        a = list(after) + holders_mod.state_lines(off, after=True)
        b.append('net.ipv4.ip_local_reserved_ports = %s' % format_port_list(reserved))
        a.append('net.ipv4.ip_local_reserved_ports = %s' % format_port_list(new_reserved))
        result['diff'] = dict(before_header='listeners/sysctl before', after_header='listeners/sysctl after',
                              before='\n'.join(b) + '\n', after='\n'.join(a) + '\n')
    if module.check_mode or not result['changed']:
        return
    if reserve_changes:
        try:
            ops.write_reserved(format_port_list(new_reserved))
        except (IOError, OSError) as e:
            module.fail_json(msg='cannot write net.ipv4.ip_local_reserved_ports = %s (%s); add that line to '
                                 '/etc/sysctl.d and run sysctl --system, or pick a kv_port below the ephemeral '
                                 'range' % (format_port_list(new_reserved), e), **result)
    for target, plan in zip(to_stop, off):
        held = span([h['port'] for h in busy if stop_target(h, allowed_units, allowed_containers) == target])
        # sockets first: a socket unit left listening would start the service again
        for sock in plan.get('sockets') or []:
            holders_mod.keep_off_socket(module, ops, sock, target, result)
        _stop(module, ops, target, held, engines, result)
        holders_mod.keep_off(module, ops, plan, result)
    deadline = time.time() + params['timeout']
    while True:
        still = split_holders(snapshot(ops, ports, host_ip)[0], is_owner)[1]
        if 'PortBusy' in ignored:  # holders the operator accepted are not waited for
            still = [h for h in still if stop_target(h, allowed_units, allowed_containers) is not None]
        if not still:
            return
        if time.time() >= deadline:
            break
        time.sleep(POLL)
    remaining = plan_stops(still, [])[1]
    fail = [dict(check='PortBusy', ports=f['ports'], msg=f['msg'].replace(
        'busy:', 'still busy %ds after stopping %s:' % (params['timeout'], ', '.join(to_stop)), 1)) for f in remaining]
    result['findings'] = fail
    module.fail_json(msg=summarize(fail, 'kv_port group %s on %s is still not free (a unit restarted itself, a '
                                         'socket unit re-listens, or a holder lives outside the unit)' % (
                                             span(ports), host_ip)), **result)
