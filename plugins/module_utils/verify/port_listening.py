# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kv_port_group state=listening: every port of the group listens on host_ip and belongs to the expected
service (unit, container or pid); fails early on a foreign holder, a wrong address or a dead unit."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import time

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_checks import (
    describe_holder, evaluate_listening, normalize_unit,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_free import (
    find_owner_container, held_by, host_ip_finding, listeners_snapshot, main_pid_of, misleading_messages,
    owner_label, summarize,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import span

POLL = 0.25


def _unit_dead(show):
    active = show.get('ActiveState')
    sub = show.get('SubState')
    if show.get('LoadState') == 'not-found':
        return 'is not loaded (LoadState=not-found)'
    if active in ('failed', 'inactive') or sub == 'auto-restart':
        return 'is %s/%s (Result=%s)' % (active, sub, show.get('Result'))
    return None


def run_listening(module, ops, params, ports, host_ip, result):
    owner_unit = normalize_unit(params['owner_unit']) if params['owner_unit'] else None
    owner_pid = params['owner_pid']
    anyone = not owner_unit and not owner_pid and not params['owner_container']
    if anyone:
        module.warn('neither owner_unit nor owner_pid given: any listener on %s counts; a foreign service on a '
                    'port of the group (the Grafana trap) is not detected' % host_ip)
    hf = host_ip_finding(ops, host_ip)
    if hf:
        result['findings'] = [hf]
        module.fail_json(msg=summarize([hf], 'kv_port group %s cannot listen on %s' % (span(ports), host_ip)), **result)
    deadline = time.time() + params['timeout']
    main_pid = [None]
    container = [None]

    def is_expected(h):
        if anyone:
            return None
        return held_by(ops, h, owner_unit, main_pid[0], owner_pid, container[0])

    while True:
        if owner_unit:
            show = ops.unit_show(owner_unit)
            dead = _unit_dead(show) if 'error' not in show else 'cannot be queried (%s)' % show['error']
            if dead:
                f = dict(check='UnitInactive', ports=list(ports), msg='%s %s while waiting for the kv_port group %s '
                         'on %s; see journalctl -u %s (look for "KVCacheSendingThread" and "Address already in use")'
                         % (owner_unit, dead, span(ports), host_ip, owner_unit))
                result['findings'] = [f]
                module.fail_json(msg=summarize([f], 'vLLM did not come up'), **result)
            main_pid[0] = main_pid_of(show)
        if owner_pid and not ops.pid_alive(owner_pid):
            f = dict(check='UnitInactive', ports=list(ports),
                     msg='owner pid %d exited while waiting for the kv_port group %s on %s' % (
                         owner_pid, span(ports), host_ip))
            result['findings'] = [f]
            module.fail_json(msg=summarize([f], 'vLLM did not come up'), **result)
        holders = listeners_snapshot(ops, ports)
        # created by the unit's "run" a moment after the unit started: look again each round, after the
        # snapshot, so a listener seen there belongs to a container that exists by now
        container[0] = find_owner_container(ops, params)
        result['socket_source'] = ops.socket_source
        ev = evaluate_listening(ports, host_ip, holders, is_expected)
        result['listeners'] = ev['ok']
        result['misleading'] = ev['misleading']
        findings = []
        if ev['foreign']:
            findings.append(dict(check='ForeignOwner', ports=sorted(set(h['port'] for h in ev['foreign'])),
                                 msg='port(s) of the group are held by another service, not by %s: %s; vLLM cannot '
                                     'bind them (curl to them answers and misleads); stop that service (or add it to '
                                     'vllm_pd_stop_services and rerun the preflight) or pick another kv_port' % (
                                         owner_label(params, owner_unit),
                                         '; '.join(describe_holder(h) for h in ev['foreign']))))
        if ev['wrong_address']:
            findings.append(dict(check='WrongAddress', ports=sorted(set(h['port'] for h in ev['wrong_address'])),
                                 msg='listening on the wrong address: %s, expected %s; VLLM_HOST_IP of the service is '
                                     'wrong or unset (vLLM auto-detects the default-route IP); export '
                                     'VLLM_HOST_IP=%s in its environment' % (
                                         '; '.join(describe_holder(h) for h in ev['wrong_address']),
                                         host_ip, host_ip)))
        if findings:
            result['findings'] = findings
            module.fail_json(msg=summarize(findings, 'kv_port group %s on %s is not owned by vLLM' % (
                span(ports), host_ip)), **result)
        if not ev['closed']:
            result['findings'] = []
            for text in misleading_messages(ev['misleading'], host_ip):
                module.warn(text)
            return
        if time.time() >= deadline:
            break
        time.sleep(POLL * 2)
    closed = ev['closed']
    extra = ''
    if ev['misleading']:
        extra = '; other listeners on those ports: %s' % '; '.join(describe_holder(h) for h in ev['misleading'])
    f = dict(check='PortClosed', ports=closed,
             msg='port(s) %s of the group do not listen on %s after %ds (%d of %d up)%s; check the service log for '
                 '"KVCacheSendingThread" errors, the tp/pp/pcp/dp sizes given here, and VLLM_HOST_IP' % (
                     span(closed), host_ip, params['timeout'], len(ports) - len(closed), len(ports), extra))
    result['findings'] = [f]
    module.fail_json(msg=summarize([f], 'kv_port group %s is not fully listening' % span(ports)), **result)
