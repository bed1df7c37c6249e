# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decisions of the kv_port_group module, as pure functions over parsed data.

Inputs are the socket dicts of sockets.py and the process dicts of owners.py;
outputs are holder records, findings ({check, ports, msg}) and stop plans.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.sockets import (
    addresses_overlap, format_endpoint, is_wildcard, normalize_ip,
)

SERVICE_SUFFIXES = ('.service', '.scope', '.socket', '.target', '.mount', '.slice', '.timer')
CONTAINER_PREFIX = 'container:'
# the runtimes whose containers the module can stop ("ENGINE stop NAME")
STOPPABLE_RUNTIMES = ('podman', 'docker')
# podman's and docker's rule for container names
_CONTAINER_NAME = re.compile(r'^[a-zA-Z0-9][a-zA-Z0-9_.-]*$')


def normalize_unit(name):
    name = (name or '').strip()
    if name and not name.endswith(SERVICE_SUFFIXES):
        name += '.service'
    return name


def build_holders(socks, owners, info_of):
    """One record per socket: the socket plus its owning process (first pid)."""
    out = []
    for s in socks:
        pids = owners.get(s['inode'], []) if s.get('inode') else []
        info = info_of(pids[0]) if pids else None
        h = dict(port=s['port'], address=s['address'], family=s['family'], state=s['state'],
                 inode=s['inode'], endpoint=format_endpoint(s['address'], s['port']),
                 pids=list(pids), pid=pids[0] if pids else None,
                 process=None, cmdline=None, unit=None, container=None)
        if s['state'] != 'LISTEN':
            h['remote'] = format_endpoint(s['remote_address'], s['remote_port'])
        if info:
            h.update(process=info.get('name'), cmdline=info.get('cmdline'), unit=info.get('unit'),
                     container=info.get('container'))
            if info.get('container'):
                h['container_runtime'] = info.get('container_runtime')
            if info.get('container_name'):
                h['container_name'] = info['container_name']
        out.append(h)
    out.sort(key=lambda h: (h['port'], h['address'], h['pid'] or 0))
    return out


def describe_holder(h):
    if h.get('state') == 'BOUND':
        return ('%s is in use (bind() fails with EADDRINUSE) by a socket that is bound but not listening and so '
                'not shown in /proc/net/tcp; find it with "ss -tanpB" (Linux >= 6.8) or by stopping candidates' % (
                    h['endpoint']))
    if h.get('pid') is None:
        who = 'a socket whose owner is not visible (inode %s; run the module as root / with become)' % h.get('inode')
    else:
        cmd = ' '.join((h.get('cmdline') or '').split())
        if len(cmd) > 160:
            cmd = cmd[:157] + '...'
        who = 'pid %d (%s) cmdline "%s"' % (h['pid'], h.get('process') or '?', cmd)
        if h.get('unit'):
            who += ' unit %s' % h['unit']
        else:
            who += ' (no systemd unit)'
        if h.get('container'):
            who += ' container %s' % (h.get('container_name') or h['container'][:12])
    state = '' if h['state'] == 'LISTEN' else ' (%s connection to %s)' % (h['state'], h.get('remote'))
    return '%s%s held by %s' % (h['endpoint'], state, who)


def _is_service_unit(unit):
    """A unit an operator would stop: services, container scopes; not login sessions."""
    if not unit:
        return False
    if unit.endswith('.scope'):
        return unit.startswith(('docker-', 'libpod-', 'crio-', 'cri-containerd-'))
    return unit not in ('init.scope',) and not unit.startswith('user@')


# States a TCP socket reaches only after its process closed it: the kernel finishes them alone (within
# tcp_fin_timeout), no process holds them, and nothing can stop them.
CLOSED_BY_ITS_PROCESS = frozenset(['FIN_WAIT1', 'FIN_WAIT2', 'CLOSING', 'LAST_ACK'])


def split_holders(holders, is_owner):
    """(held by the owner, the others); is_owner None means there is no owner to tell apart.

    A connection with no process on a port the owner itself listens on counts as the owner's, not a holder to name
    or stop: one its listener accepted and closed (CLOSED_BY_ITS_PROCESS), or one still waiting in its listener's
    accept queue (inode 0: no file yet; ESTABLISHED, or CLOSE_WAIT when the peer closed first). Under traffic a
    running engine's group always has the first, and the second while its peers open connections faster than it
    accepts them (a loaded host)."""
    if is_owner is None:
        return [], list(holders)
    owned, others = [], []
    for h in holders:
        (owned if is_owner(h) else others).append(h)
    listened = set(h['port'] for h in owned if h['state'] == 'LISTEN')
    holding = []
    for h in others:
        of_listener = not h.get('pids') and (h['state'] in CLOSED_BY_ITS_PROCESS or not h.get('inode')) and h['port'] in listened
        (owned if of_listener else holding).append(h)
    return owned, holding


def parse_stop_services(items):
    """stop_services -> (units, containers): 'container:NAME' entries name containers, the rest units.

    Raises ValueError naming the first entry that is not a valid container name.
    """
    units, containers = set(), set()
    for item in items or []:
        item = (item or '').strip()
        if not item:
            continue
        if item.startswith(CONTAINER_PREFIX):
            name = item[len(CONTAINER_PREFIX):]
            if not _CONTAINER_NAME.match(name):
                raise ValueError('stop_services entry %r: %r is not a container name or id '
                                 '(letters, digits, "_", ".", "-")' % (item, name))
            containers.add(name)
        else:
            units.add(normalize_unit(item))
    return units, containers


def container_label(h):
    """The name of a holder's container, else its short id."""
    return h.get('container_name') or (h.get('container') or '')[:12]


def container_matches(h, names):
    """True when the holder's container is one of names (by name, full id or 12-character id)."""
    cid = h.get('container')
    if not cid:
        return False
    return bool(set([h.get('container_name'), cid, cid[:12]]) & set(names))


def stop_target(h, units, containers):
    """What stopping frees holder h: its unit if allowed, else 'container:NAME' if its container is
    allowed and podman/docker can stop it, else None."""
    unit = h.get('unit')
    # a socket systemd listens on is stopped through its .socket unit, allowed by name or by the unit it starts
    if unit and (unit in units or set(h.get('activates') or []) & set(units)):
        return unit
    if container_matches(h, containers) and h.get('container_runtime') in STOPPABLE_RUNTIMES:
        return CONTAINER_PREFIX + container_label(h)
    return None


def blocker_fix(hs):
    """The fix for holders hs of one process/unit that may not be stopped (first one decides)."""
    first = hs[0]
    unit = first.get('unit')
    if first.get('state') == 'BOUND':
        return 'stop the process that bound it, or pick another kv_port'
    if first.get('pid') is None:
        return 'find the owner with root privileges (the module must run with become) or pick another kv_port'
    if first.get('container') and first.get('container_runtime') in STOPPABLE_RUNTIMES:
        name = container_label(first)
        return ('container %s is not allowed to be stopped: add container:%s to vllm_pd_stop_services (module '
                'option stop_services) so the preflight stops it (%s stop %s), or stop it yourself, or pick '
                'another kv_port' % (name, name, first['container_runtime'], name))
    if first.get('container'):
        return ('stop the %s container %s with the tool that manages it, or pick another kv_port' % (
            first.get('container_runtime') or 'unknown', container_label(first)))
    if unit and _is_service_unit(unit):
        return ('add %s to vllm_pd_stop_services (module option stop_services) so the preflight stops it, '
                'or stop it yourself (systemctl stop %s), or pick another kv_port' % (unit, unit))
    fix = ('pid %d belongs to no systemd service (%s) and is never killed by this module: stop it yourself '
           '(kill %d) or pick another kv_port' % (first['pid'], unit or 'no unit', first['pid']))
    if any(x['state'] != 'LISTEN' for x in hs):
        fix += ('; an outbound connection took the port from the ephemeral range: reserve the group '
                'in net.ipv4.ip_local_reserved_ports')
    return fix


def plan_stops(busy, stop_services):
    """Decide what may be stopped.

    Returns (targets to stop sorted: units and 'container:NAME', findings for holders that may not
    be stopped). Only units and containers listed in stop_services are ever stopped; a process
    without a unit or container is never touched.
    """
    units, containers = parse_stop_services(stop_services)
    to_stop = set()
    blockers = {}
    for h in busy:
        target = stop_target(h, units, containers)
        if target:
            to_stop.add(target)
            continue
        unit = h.get('unit')
        key = (h.get('pid'), unit, h.get('inode') if h.get('pid') is None else None)
        blockers.setdefault(key, []).append(h)
    findings = []
    for (_pid, unit, _inode), hs in sorted(blockers.items(), key=lambda kv: min(x['port'] for x in kv[1])):
        ports = sorted(set(x['port'] for x in hs))
        where = '; '.join(describe_holder(x) for x in hs[:4])
        if len(hs) > 4:
            where += '; and %d more socket(s)' % (len(hs) - 4)
        fix = blocker_fix(hs)
        findings.append(dict(check='PortBusy', ports=ports, holders=hs,
                             msg='port(s) %s busy: %s; fix: %s' % (','.join(str(p) for p in ports), where, fix)))
    return sorted(to_stop), findings


def holder_lines(holders):
    """Stable text lines for diff output."""
    return sorted(set('%s %s pid=%s %s unit=%s%s' % (
        h['endpoint'], h['state'], h.get('pid'), h.get('process'), h.get('unit'),
        ' container=%s' % container_label(h) if h.get('container') else '') for h in holders))


def evaluate_listening(ports, host_ip, listeners, is_expected):
    """Classify each port of the group after vLLM started.

    listeners: holder records (state LISTEN) on the group's ports.
    is_expected(holder) -> True/False/None (None: no owner given, accept anyone).
    Returns dict with lists: ok, closed, foreign (fatal), wrong_address (fatal),
    misleading (warnings).
    """
    host_ip = normalize_ip(host_ip)
    by_port = dict((p, []) for p in ports)
    for h in listeners:
        if h['port'] in by_port:
            by_port[h['port']].append(h)
    res = dict(ok=[], closed=[], foreign=[], wrong_address=[], misleading=[])
    for port in ports:
        hs = by_port[port]
        if is_wildcard(host_ip):
            on_host = list(hs)
        else:
            on_host = [h for h in hs if normalize_ip(h['address']) == host_ip]
        blocking = [h for h in hs if addresses_overlap(h['address'], h['family'], host_ip)]
        good = [h for h in on_host if is_expected(h) is not False]
        bad_blocking = [h for h in blocking if is_expected(h) is False]
        if bad_blocking:
            res['foreign'].extend(bad_blocking)
            continue
        if good:
            res['ok'].extend(good)
            continue
        # the expected owner on another address (VLLM_HOST_IP wrong), or, with no
        # owner given, an unidentified wildcard listener that shadows host_ip
        expected_elsewhere = [h for h in hs if h not in on_host and (
            is_expected(h) or (is_expected(h) is None and h in blocking))]
        if expected_elsewhere:
            res['wrong_address'].extend(expected_elsewhere)
            continue
        res['misleading'].extend(hs)
        res['closed'].append(port)
    return res
