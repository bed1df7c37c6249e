# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The start guard: the preflight's port and address checks, run by systemd before every start.

The engine and proxy roles copy this file and the module_utils it imports, unchanged, to
/usr/local/lib/vllm-pd/ansible_collections/vllm_pd/ascend/plugins/module_utils/ on the host, and
the unit runs ``ExecStartPre=/usr/local/libexec/vllm-pd/start-guard /etc/vllm-pd/NAME.guard.json``
(roles/engine/files/start-guard calls main() here). Whatever starts the unit (boot, systemctl,
Restart=) then goes through it:

1. wait (bounded, ``address_wait`` seconds) until VLLM_HOST_IP can be bound on this host, so a
   unit started at boot waits for the data NIC's address, not only for network-online.target;
2. the Mooncake port group (and the API or proxy ports) must be free on that address, or held only
   by this unit or its container, the same sockets, owners and bind rules as kv_port_group;
3. group ports in the kernel's ephemeral range must be reserved (the runtime sysctl does not
   survive a reboot): re-reserved when the deployment asked for it, else refused.

A refusal is ONE line on stderr (the unit's journal) naming the port, the holder (pid, unit,
container) and the fix, and exit status 1. The guard never stops or kills anything.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import json
import os
import socket
import subprocess
import time

from ansible_collections.vllm_pd.ascend.plugins.module_utils import owners as owners_mod
from ansible_collections.vllm_pd.ascend.plugins.module_utils.port_checks import build_holders, container_label
from ansible_collections.vllm_pd.ascend.plugins.module_utils.port_group import (
    format_port_list, merge_ranges, port_group, ports_to_ranges, range_findings, read_sysctl_ranges, span,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.sock_diag import read_tcp_table
from ansible_collections.vllm_pd.ascend.plugins.module_utils.sockets import classify, format_endpoint, normalize_ip

PREFIX = 'vllm-pd start guard'
EXIT_REFUSED = 1
EXIT_CONFIG = 2
DEFAULT_ADDRESS_WAIT = 60
POLL = 0.5
# the files the guard needs on the host, copied by roles/engine/tasks/guard.yml
MODULE_UTILS = ('start_guard.py', 'port_group.py', 'port_checks.py', 'sockets.py', 'sock_diag.py', 'owners.py')


class ConfigError(ValueError):
    pass


def parse_config(data):
    """Validate the JSON object written by the role; returns a normalized dict or raises ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError('the guard configuration is not a JSON object')
    unit = data.get('unit')
    if not isinstance(unit, str) or not unit:
        raise ConfigError('"unit" (the systemd unit name) is missing')
    cfg = dict(unit=unit, container=data.get('container') or None, host_ip=data.get('host_ip') or None,
               reserve_ephemeral=bool(data.get('reserve_ephemeral', False)), ports=[], group=[])
    try:
        cfg['address_wait'] = float(data.get('address_wait', DEFAULT_ADDRESS_WAIT))
    except (TypeError, ValueError):
        raise ConfigError('"address_wait" must be a number of seconds')
    if not 0 <= cfg['address_wait'] <= 3600:
        raise ConfigError('"address_wait" must be 0 to 3600 seconds')
    group = data.get('group')
    if group:
        try:
            cfg['group'] = port_group(int(group['kv_port']), int(group.get('tp_size', 1)), int(group.get('pp_size', 1)),
                                      int(group.get('pcp_size', 1)), int(group.get('dp_rank_start', 0)),
                                      int(group.get('dp_size_local', 1)))
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError('"group" is not a valid port group: %s' % e)
    for item in data.get('ports') or []:
        try:
            port, what = int(item['port']), str(item.get('what') or 'port')
        except (KeyError, TypeError, ValueError):
            raise ConfigError('"ports" entries must be {"port": N, "what": TEXT}, got %r' % (item,))
        cfg['ports'].append((port, what))
    for port in cfg['group'] + [p for p, _w in cfg['ports']]:
        if not 1 <= port <= 65535:
            raise ConfigError('port %d is outside 1-65535' % port)
    return cfg


def address_error(host_ip):
    """None when HOST_IP can be bound here (an address of this host, past IPv6 DAD), else the error text."""
    s = socket.socket(socket.AF_INET6 if ':' in host_ip else socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host_ip, 0))
    except (socket.error, OverflowError, ValueError) as e:
        # EADDRNOTAVAIL: not (yet) here; no errno: not an address at all
        if isinstance(e, socket.gaierror) or getattr(e, 'errno', None) in (errno.EADDRNOTAVAIL, None):
            return str(e)
        return None
    finally:
        s.close()
    return None


def wait_for_address(host_ip, wait, check=address_error, sleep=time.sleep, now=time.time):
    """Poll until HOST_IP is an address of this host or WAIT seconds passed: (error or None, seconds waited)."""
    start = now()
    while True:
        err = check(host_ip)
        waited = now() - start
        if err is None or waited >= wait:
            return err, waited
        sleep(min(POLL, max(0.0, wait - waited)))


def bind_in_use(host_ip, port):
    """True when bind(HOST_IP, PORT) with SO_REUSEADDR (as ZeroMQ does) fails with EADDRINUSE."""
    s = socket.socket(socket.AF_INET6 if ':' in host_ip else socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host_ip, port))
    except socket.error as e:
        return getattr(e, 'errno', None) == errno.EADDRINUSE
    finally:
        s.close()
    return False


class HostView(object):
    """What the guard reads from the host (tests replace it)."""

    proc_root = '/proc'

    def sockets(self, ports):
        return read_tcp_table(self.proc_root, ports=ports)[0]

    def owners(self, inodes):
        return owners_mod.socket_owners(self.proc_root, inodes)

    def process_info(self, pid):
        return owners_mod.process_info(pid, self.proc_root, owners_mod.own_containers(self.proc_root))

    def container_name(self, runtime, cid):
        name = owners_mod.resolve_container_name(dict(runtime=runtime, id=cid))
        if name or runtime != 'podman':
            return name
        try:
            out = subprocess.run(['podman', 'container', 'inspect', '--format', '{{.Name}}', cid],
                                 capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() or None if out.returncode == 0 else None

    def bind_in_use(self, host_ip, port):
        return bind_in_use(host_ip, port)

    def sysctl_ranges(self):
        return read_sysctl_ranges(self.proc_root)

    def write_reserved(self, value):
        with open(os.path.join(self.proc_root, 'sys/net/ipv4/ip_local_reserved_ports'), 'w') as f:
            f.write(value + '\n')

    def host_addresses(self):
        try:
            out = subprocess.run(['ip', '-o', 'addr', 'show'], capture_output=True, text=True, timeout=5, check=False)
        except (OSError, subprocess.SubprocessError):
            return ''
        return ', '.join('%s=%s' % (f[1], f[3]) for f in (line.split() for line in out.stdout.splitlines())
                         if len(f) > 3 and f[2] in ('inet', 'inet6') and f[1] != 'lo')


def foreign_holders(view, cfg, host_ip, ports):
    """Holders that would block the start: sockets that block a bind on HOST_IP, minus this unit's own
    (its cgroup) and its container's; plus ports bound without a socket-table entry (bind probe)."""
    blocking, _misleading = classify(view.sockets(ports), ports, host_ip)
    holders = []
    if blocking:
        owners = view.owners([s['inode'] for s in blocking])

        def info(pid):
            i = dict(view.process_info(pid))
            if i.get('container'):
                i['container_name'] = view.container_name(i.get('container_runtime'), i['container'])
            return i
        for h in build_holders(blocking, owners, info):
            if h.get('unit') == cfg['unit']:
                continue
            if cfg['container'] and h.get('container') and container_label(h) == cfg['container']:
                continue
            holders.append(h)
    seen = set(s['port'] for s in blocking)
    for port in ports:
        if port not in seen and view.bind_in_use(host_ip, port):
            holders.append(dict(port=port, address=host_ip, endpoint=format_endpoint(host_ip, port), state='BOUND',
                                pid=None, pids=[], unit=None, container=None, process=None))
    return holders


def _who(h):
    if h.get('state') == 'BOUND':
        return 'a socket bound but not listening (not in the socket table; find it with ss -tanpB)'
    if h.get('pid') is None:
        return 'a socket whose owner is not visible (inode %s)' % h.get('inode')
    who = 'pid %d (%s)' % (h['pid'], h.get('process') or '?')
    who += ' unit %s' % h['unit'] if h.get('unit') else ' (no unit)'
    if h.get('container'):
        who += ' container %s' % container_label(h)
    if h.get('state') != 'LISTEN':
        who += ' (%s connection to %s)' % (h.get('state'), h.get('remote'))
    return who


def _fix(h):
    unit = h.get('unit') or ''
    if h.get('container') and h.get('container_runtime') in ('podman', 'docker'):
        name = container_label(h)
        return ('%s stop %s and keep it from starting again (restart policy), or add container:%s to '
                'vllm_pd_stop_services and run deploy_pd.yml' % (h['container_runtime'], name, name))
    if unit.endswith('.service') or (unit.endswith('.socket')):
        return ('systemctl disable --now %s (it starts at boot), or add %s to vllm_pd_stop_services and run '
                'deploy_pd.yml' % (unit, unit))
    if h.get('state') not in (None, 'LISTEN', 'BOUND'):
        return ('an outbound connection took the port from the ephemeral range: reserve the group in '
                'net.ipv4.ip_local_reserved_ports')
    if h.get('pid'):
        return 'stop pid %d yourself (the guard kills nothing), or pick another kv_port' % h['pid']
    return 'stop the process that bound it, or pick another kv_port'


def busy_line(cfg, host_ip, holders, what_of):
    """The refusal line for busy ports: one clause per holder (pid/unit/container), its ports and its fix."""
    groups = []
    for h in holders:
        key = (h.get('pid'), h.get('unit'), h.get('state') == 'BOUND' and h['port'])
        for g in groups:
            if g[0] == key:
                g[1].append(h)
                break
        else:
            groups.append((key, [h]))
    clauses = []
    for _key, hs in groups:
        ports = sorted(set(x['port'] for x in hs))
        whats = sorted(set(what_of(p) for p in ports))
        clauses.append('%s %s on %s held by %s; fix: %s' % (
            'port' if len(ports) == 1 else 'ports', span(ports) + ' (%s)' % ', '.join(whats), host_ip,
            _who(hs[0]), _fix(hs[0])))
    return '%s: refused to start %s: %s; nothing was stopped' % (PREFIX, cfg['unit'], ' | '.join(clauses))


def run(cfg, env, view, log, wait=wait_for_address):
    """The guard itself: returns the exit status; log(line) writes one journal line."""
    host_ip = env.get('VLLM_HOST_IP') or cfg['host_ip']
    if not host_ip:
        log('%s: refused to start %s: no address to check (VLLM_HOST_IP unset in the environment file and no '
            'host_ip in the guard configuration); fix: run deploy_pd.yml again' % (PREFIX, cfg['unit']))
        return EXIT_CONFIG
    host_ip = normalize_ip(host_ip)
    err, waited = wait(host_ip, cfg['address_wait'])
    if err is not None:
        log('%s: refused to start %s: VLLM_HOST_IP %s is not an address of this host after waiting %.0f s (%s; '
            'the host has: %s); fix: bring up the data NIC with that address, or set vllm_pd_host_ip / '
            'vllm_pd_network to the data address and run deploy_pd.yml; nothing was stopped' % (
                PREFIX, cfg['unit'], host_ip, waited, err, view.host_addresses() or 'no other address'))
        return EXIT_REFUSED
    if waited >= POLL:
        log('%s: %s waited %.1f s for VLLM_HOST_IP %s to appear on this host' % (PREFIX, cfg['unit'], waited, host_ip))
    group = cfg['group']
    if group:
        ephemeral, reserved = view.sysctl_ranges()
        hit = range_findings(group, [], ephemeral, reserved)
        if hit:
            wanted = format_port_list(merge_ranges(list(reserved) + ports_to_ranges(hit[0]['ports'])))
            if not cfg['reserve_ephemeral']:
                log('%s: refused to start %s: %s; nothing was stopped' % (PREFIX, cfg['unit'], hit[0]['msg']))
                return EXIT_REFUSED
            try:
                view.write_reserved(wanted)
            except (IOError, OSError) as e:
                log('%s: refused to start %s: cannot reserve %s in net.ipv4.ip_local_reserved_ports (%s); fix: add '
                    '"net.ipv4.ip_local_reserved_ports = %s" to /etc/sysctl.d and run sysctl --system' % (
                        PREFIX, cfg['unit'], span(hit[0]['ports']), e, wanted))
                return EXIT_REFUSED
    whats = dict((p, 'kv_port group') for p in group)
    for port, what in cfg['ports']:
        whats.setdefault(port, what)
    ports = sorted(whats)
    holders = foreign_holders(view, cfg, host_ip, ports)
    if holders:
        log(busy_line(cfg, host_ip, holders, lambda p: whats[p]))
        return EXIT_REFUSED
    return 0


def main(argv, env=None, view=None, log=None, stream=None):
    """start-guard CONFIG.json: exit 0 to let systemd start the unit, 1 when refused, 2 on a bad configuration."""
    import sys
    env = os.environ if env is None else env
    stream = stream or sys.stderr

    def _log(line):
        stream.write(' '.join(line.split('\n')) + '\n')
        stream.flush()
    log = log or _log
    if len(argv) != 1:
        log('%s: usage: start-guard /etc/vllm-pd/NAME.guard.json' % PREFIX)
        return EXIT_CONFIG
    try:
        with open(argv[0]) as f:
            cfg = parse_config(json.load(f))
    except (IOError, OSError, ValueError) as e:
        log('%s: refused to start: cannot use %s (%s); fix: run deploy_pd.yml again to rewrite it' % (
            PREFIX, argv[0], e))
        return EXIT_CONFIG
    return run(cfg, env, view or HostView(), log)
