# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Allowed holders stay off: what the preflight changes on a unit or container it stops, the record of
what was there before (one JSON object a line in /etc/vllm-pd/stopped-services), and the plan that
puts exactly that back (stop_pd.yml -e vllm_pd_restore_services=true).

A unit is disabled, never masked: a mask links the unit file to /dev/null, which also hides it from
"systemctl enable" and from the package's own presets, and "unmask" cannot tell what the unit's state
was before; "disable" is undone exactly by "enable" of the units recorded as enabled.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_checks import CONTAINER_PREFIX

# UnitFileState values that "systemctl disable" undoes and "enable" restores (systemctl(1) is-enabled)
DISABLE = {'enabled': [], 'enabled-runtime': ['--runtime']}
NO_RESTART = ('', 'no', None)


def parse_list_sockets(text):
    """{port: [(listen, socket unit, [activated units])]} from systemctl list-sockets --no-legend --full."""
    out = {}
    for line in (text or '').splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[1].endswith('.socket'):
            continue
        listen = parts[0]
        host, _sep, port = listen.rpartition(':')
        if not port.isdigit() or not host:
            continue
        out.setdefault(int(port), []).append((listen, parts[1], parts[2:]))
    return out


def attach_socket_units(busy, list_sockets):
    """A socket systemd itself listens on (pid 1, init.scope) belongs to the .socket unit that owns it:
    holder['unit'] becomes that unit and holder['activates'] the units it starts."""
    if not any(h.get('pid') == 1 or h.get('unit') == 'init.scope' for h in busy):
        return
    table = parse_list_sockets(list_sockets())
    for h in busy:
        if h.get('pid') != 1 and h.get('unit') != 'init.scope':
            continue
        hits = table.get(h['port']) or []
        if hits:
            h['unit'] = hits[0][1]
            h['activates'] = list(hits[0][2])


def _words(value):
    return [w for w in (value or '').split() if w]


def _unit_record(ops, name, st=None):
    st = ops.unit_state(name) if st is None else st
    if 'error' in st:
        return dict(name=name, enabled=None, active=None, error=st['error'])
    return dict(name=name, enabled=st.get('UnitFileState') or None, active=st.get('ActiveState') == 'active')


def plan_off(target, engine, ops):
    """The record of one holder to stop, with its state before (read-only)."""
    if target.startswith(CONTAINER_PREFIX):
        name = target[len(CONTAINER_PREFIX):]
        policy = ops.container_restart_policy(engine, name)
        return dict(kind='container', name=name, engine=engine, active=True, restart_policy=policy,
                    set_restart_no=policy not in NO_RESTART)
    st = ops.unit_state(target)
    rec = _unit_record(ops, target, st)
    rec['kind'] = 'unit'
    if target.endswith('.socket'):
        rec['sockets'] = []
        rec['services'] = [_unit_record(ops, u) for u in _words(st.get('Triggers')) if u.endswith('.service')]
    else:
        rec['sockets'] = [_unit_record(ops, u) for u in _words(st.get('TriggeredBy')) if u.endswith('.socket')]
        rec['services'] = []
    for u in [rec] + rec['sockets'] + rec['services']:
        u['disable'] = u.get('enabled') in DISABLE
    return rec


def state_lines(records, after):
    """Diff lines: each unit's enablement and activity before, or as the run leaves it."""
    out = []
    for r in records:
        if r['kind'] == 'container':
            policy = 'no' if after and r['set_restart_no'] else (r.get('restart_policy') or 'no')
            out.append('container %s %s restart=%s' % (r['name'], 'stopped' if after else 'running', policy))
            continue
        for u in r['sockets'] + [r] + r['services']:
            enabled = 'disabled' if after and u['disable'] else u.get('enabled')
            active = False if after else u.get('active')
            out.append('unit %s %s %s' % (u['name'], enabled, 'active' if active else 'inactive'))
    return sorted(out)


def _disable(module, ops, u, why, result):
    if not u.get('disable'):
        if u.get('enabled') in ('static', 'indirect', 'generated', 'linked', 'alias'):
            module.warn('%s is %s: disable cannot keep it off (another unit or a link starts it); it may come '
                        'back and take %s ports again' % (u['name'], u['enabled'], why))
        return
    rc, err = ops.disable_unit(u['name'], DISABLE[u['enabled']])
    if rc != 0:
        module.fail_json(msg='systemctl disable %s failed (rc=%d): %s; it was stopped because it holds ports of '
                             'the kv_port group (%s); disable it by hand so it does not start again at boot' % (
                                 u['name'], rc, (err or '').strip(), why), **result)


def keep_off_socket(module, ops, sock, target, result):
    """Stop and disable a .socket that would start target again."""
    if sock.get('active'):
        rc, err = ops.stop_unit(sock['name'])
        if rc != 0:
            module.fail_json(msg='systemctl stop %s failed (rc=%d): %s; it starts %s, which holds ports of the '
                                 'kv_port group; stop it by hand' % (sock['name'], rc, (err or '').strip(), target),
                             **result)
    _disable(module, ops, sock, target, result)


def keep_off(module, ops, rec, result):
    """After the stop: disable the unit (and the services a socket starts), or make a container not restart."""
    if rec['kind'] == 'container':
        rec['restart_policy_changed'] = False
        if not rec['set_restart_no']:
            return
        rc, err = ops.set_container_restart(rec['engine'], rec['name'], 'no')
        if rc == 0:
            rec['restart_policy_changed'] = True
            return
        module.warn('%s update --restart no %s failed (rc=%d): %s; the container keeps restart policy %s (podman '
                    'before 5 cannot change it), so podman-restart.service or the docker daemon may start it again '
                    'at boot; remove that policy by hand' % (rec['engine'], rec['name'], rc, (err or '').strip(),
                                                             rec['restart_policy']))
        return
    _disable(module, ops, rec, rec['name'], result)
    for svc in rec['services']:
        if svc.get('active'):
            ops.stop_unit(svc['name'])
        _disable(module, ops, svc, rec['name'], result)


# -- the record file and the restore plan (controller side, through the pd_restore_plan filter) ----------

def record_lines(records):
    """One JSON object a line for /etc/vllm-pd/stopped-services (sorted keys: the same holder, the same line)."""
    return [json.dumps(r, sort_keys=True) for r in records]


def parse_record(text):
    """Records of /etc/vllm-pd/stopped-services: JSON lines, or the old format (a unit name a line, or
    container:ENGINE:NAME), whose units and containers were running and whose enablement was not changed."""
    out = []
    for line in (text or '').splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith('{'):
            try:
                rec = json.loads(line)
            except ValueError:
                raise ValueError('line %r of the record is not JSON' % line)
            if not isinstance(rec, dict) or rec.get('kind') not in ('unit', 'container') or not rec.get('name'):
                raise ValueError('line %r of the record has no kind (unit/container) and name' % line)
            out.append(rec)
        elif line.startswith(CONTAINER_PREFIX):
            parts = line.split(':', 2)
            if len(parts) != 3 or not parts[2]:
                raise ValueError('line %r of the record is not container:ENGINE:NAME' % line)
            out.append(dict(kind='container', engine=parts[1], name=parts[2], active=True, set_restart_no=False))
        else:
            out.append(dict(kind='unit', name=line, enabled=None, active=True, disable=False, sockets=[],
                            services=[]))
    return out


def restore_plan(records):
    """Actions that put back what the records say was there, first record of a name wins (the oldest state).

    Each action: {kind: unit, name, enable, runtime, start} or {kind: container, engine, name,
    restart_policy (or None: leave it), start}. Sockets come before the service they start.
    """
    actions, seen = [], set()
    for r in records:
        if r.get('kind') == 'container':
            key = ('container', r.get('engine'), r['name'])
            if key in seen:
                continue
            seen.add(key)
            policy = r.get('restart_policy') if r.get('restart_policy_changed') else None
            actions.append(dict(kind='container', engine=r.get('engine') or 'podman', name=r['name'],
                                restart_policy=policy, start=bool(r.get('active', True))))
            continue
        units = list(r.get('sockets') or []) + [r] + list(r.get('services') or [])
        for u in units:
            if ('unit', u['name']) in seen:
                continue
            seen.add(('unit', u['name']))
            was = u.get('enabled')
            actions.append(dict(kind='unit', name=u['name'], enable=bool(u.get('disable')) and was in DISABLE,
                                runtime=was == 'enabled-runtime', start=bool(u.get('active'))))
    return actions
