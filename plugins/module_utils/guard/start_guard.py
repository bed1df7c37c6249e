# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The start guard: the preflight's port and address checks, run by systemd before every start.

The engine and proxy roles copy this file and the module_utils it imports (found from its import
statements: guard_files.guard_tree, written by file_set's start_guard_root from its own payload), unchanged, to
/usr/local/lib/vllm-pd/ansible_collections/vllm_pd/ascend/plugins/module_utils/ on the host, and
the unit runs it as ``ExecStartPre=`` with /etc/vllm-pd/NAME.guard.json
(``/usr/bin/python3 -I /usr/local/libexec/vllm-pd/start-guard``, roles/engine/files/start-guard, calls main()). Whatever starts the unit (boot, systemctl,
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
import time

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.host_ops import HostOps
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.params import ParamError
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_checks import container_label, split_holders
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_free import (
    bound_holders, check_free, owner_predicate, snapshot,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_windows import reserved_windows
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.ip_addr import parse_ip_addr
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import (
    format_port_list, merge_ranges, port_group, ports_to_ranges, range_findings, span,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.sockets import normalize_ip

PREFIX = 'vllm-pd start guard'
EXIT_REFUSED = 1
EXIT_CONFIG = 2
DEFAULT_ADDRESS_WAIT = 60
POLL = 0.5


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
    cfg['container_engine'] = data.get('container_engine') or None
    cfg['npu_count'] = data.get('npu_count')
    group = data.get('group')
    if group:
        try:
            cfg['group_args'] = dict((k, int(group.get(k, d))) for k, d in (
                ('kv_port', None), ('tp_size', 1), ('pp_size', 1), ('pcp_size', 1), ('dp_rank_start', 0),
                ('dp_size_local', 1)))
            cfg['group'] = port_group(**cfg['group_args'])
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


class GuardOps(HostOps):
    """HostOps outside Ansible (commands through subprocess), plus the addresses for a refusal line."""

    def host_addresses(self):
        rc, out, _err = self.run(['ip', '-o', 'addr', 'show'])
        if rc != 0:
            return ''
        return ', '.join('%s=%s/%d' % (a['ifname'], a['address'], a['prefix']) for a in parse_ip_addr(out) if a['ifname'] != 'lo')


def extra_port_holders(ops, cfg, host_ip, ports):
    """Holders of the API/proxy ports that are not this unit's or its container's: the free check's
    snapshot, bind probe and owner rules (port_free), applied to these ports."""
    busy, _misleading = snapshot(ops, ports, host_ip)
    busy.extend(bound_holders(ops, ports, host_ip, busy))
    is_owner = owner_predicate(ops, dict(owner_unit=cfg['unit'], owner_pid=None, owner_container=cfg['container'],
                                         container_engine=cfg['container_engine'])) if busy else None
    return split_holders(busy, is_owner)[1]


def holder_entry(h):
    """A holder record (port_free snapshot) as the guard reports it."""
    return dict(port=h['port'], pid=h.get('pid'), process=h.get('process'), unit=h.get('unit'),
                container=container_label(h) if h.get('container') else None, state=h.get('state'),
                remote=h.get('remote'), inode=h.get('inode'), fix=None)


def finding_entry(f):
    """A PortBusy finding of check_free (one blocking socket) as the guard reports it."""
    bound = f.get('pid') is None and 'bound but not listening' in f.get('msg', '')
    return dict(port=f['port'], pid=f.get('pid'), process=None, unit=f.get('unit'), container=f.get('container'),
                state='BOUND' if bound else None, remote=None, inode=None, fix=f.get('fix'))


def still_blocks(ops, host_ip, e):
    """Whether a busy entry really stops vLLM's bind (SO_REUSEADDR, as vLLM and ZeroMQ bind).

    A listener always does. A connection without a live owner does not when the kernel lets a
    SO_REUSEADDR bind through: a killed engine leaves its accepted connections orphaned in FIN_WAIT
    for up to a minute (peers such as the proxy keep theirs open), and they must not hold up its
    Restart=. The bind itself decides, as for vLLM.
    """
    if e['state'] in ('LISTEN', 'BOUND'):
        return True
    if e['state'] is None and e['pid'] is not None:
        return True  # a finding of check_free with a live holder: not an orphan
    return ops.bind_probe(host_ip, e['port']) is not None


def _who(e):
    if e['state'] == 'BOUND':
        return 'a socket bound but not listening (not in the socket table; find it with ss -tanpB)'
    if e['pid'] is None:
        return 'a socket whose owner is not visible (inode %s)' % e.get('inode')
    who = 'pid %d' % e['pid'] + (' (%s)' % e['process'] if e.get('process') else '')
    who += ' unit %s' % e['unit'] if e.get('unit') else ' (no unit)'
    if e.get('container'):
        who += ' container %s' % e['container']
    if e['state'] not in (None, 'LISTEN'):
        who += ' (%s connection to %s)' % (e['state'], e.get('remote'))
    return who


def _fix(e):
    unit = e.get('unit') or ''
    if e.get('container'):
        return ('stop container %s and keep it from starting again (its restart policy), or add container:%s to '
                'vllm_pd_stop_services and run deploy_pd.yml' % (e['container'], e['container']))
    if unit.endswith(('.service', '.socket')):
        return ('systemctl disable --now %s (or it starts again at boot), or add %s to vllm_pd_stop_services and '
                'run deploy_pd.yml' % (unit, unit))
    if e['state'] not in (None, 'LISTEN', 'BOUND'):
        return ('an outbound connection took the port from the ephemeral range: reserve the group in '
                'net.ipv4.ip_local_reserved_ports')
    if e['pid']:
        return 'stop pid %d yourself (kill %d; the guard kills nothing), or pick another kv_port' % (e['pid'], e['pid'])
    return e.get('fix') or 'stop the process that bound it, or pick another kv_port'


def busy_clauses(host_ip, entries, what_of):
    """One clause per holder (pid/unit/container): its ports, who it is and the fix."""
    groups = []
    for e in entries:
        key = (e['pid'], e['unit'], e['container'], e['state'] == 'BOUND' and e['port'])
        for g in groups:
            if g[0] == key:
                g[1].append(e)
                break
        else:
            groups.append((key, [e]))
    clauses = []
    for _key, es in groups:
        ports = sorted(set(x['port'] for x in es))
        whats = sorted(set(what_of(p) for p in ports))
        clauses.append('%s %s (%s) on %s held by %s; fix: %s' % (
            'port' if len(ports) == 1 else 'ports', span(ports), ', '.join(whats), host_ip, _who(es[0]), _fix(es[0])))
    return clauses


def refused(cfg, clauses):
    return '%s: refused to start %s: %s; nothing was stopped' % (PREFIX, cfg['unit'], ' | '.join(clauses))


def reserve_again(cfg, ops):
    """Re-reserve group ports in the ephemeral range (the runtime sysctl is lost at reboot) when the
    deployment reserved them (vllm_pd_reserve_ephemeral); a clause when that fails, else None."""
    ephemeral, reserved = ops.sysctl_ranges()
    hit = range_findings(cfg['group'], [], ephemeral, reserved)
    if not hit:
        return None
    wanted = format_port_list(merge_ranges(list(reserved) + ports_to_ranges(hit[0]['ports'])))
    try:
        ops.write_reserved(wanted)
    except (IOError, OSError) as e:
        return ('cannot reserve %s in net.ipv4.ip_local_reserved_ports (%s); fix: add "net.ipv4.ip_local_reserved_ports '
                '= %s" to /etc/sysctl.d and run sysctl --system' % (span(hit[0]['ports']), e, wanted))
    return None


def run(cfg, env, ops, log, wait=wait_for_address):
    """The guard itself: returns the exit status; log(line) writes one journal line."""
    host_ip = env.get(runtime(None)['host_ip_env']) or cfg['host_ip']
    if not host_ip:
        log('%s: refused to start %s: no address to check (VLLM_HOST_IP unset in the environment file and no '
            'host_ip in the guard configuration); fix: run deploy_pd.yml again' % (PREFIX, cfg['unit']))
        return EXIT_CONFIG
    host_ip = normalize_ip(host_ip)
    err, waited = wait(host_ip, cfg['address_wait'])
    if err is not None:
        log(refused(cfg, ['VLLM_HOST_IP %s is not an address of this host after waiting %.0f s (%s; the host has: '
                          '%s); fix: bring up the data NIC with that address, or set vllm_pd_host_ip / vllm_pd_network '
                          'to the data address and run deploy_pd.yml' % (
                              host_ip, waited, err, ops.host_addresses() or 'no other address')]))
        return EXIT_REFUSED
    if waited >= POLL:
        log('%s: %s waited %.1f s for VLLM_HOST_IP %s to appear on this host' % (PREFIX, cfg['unit'], waited, host_ip))
    whats = dict((p, 'kv_port group') for p in cfg['group'])
    extra = [p for p, _w in cfg['ports'] if p not in whats]
    for port, what in cfg['ports']:
        whats.setdefault(port, what)
    clauses, entries = [], []
    if cfg['group']:
        if cfg['reserve_ephemeral']:
            failed = reserve_again(cfg, ops)
            if failed:
                log(refused(cfg, [failed]))
                return EXIT_REFUSED
        g = cfg['group_args']
        try:
            # the windows of this engine's environment (its env file): the preflight's function and values
            win = reserved_windows(env, npu_count=0)
        except ValueError as e:
            log('%s: refused to start %s: %s; fix: correct it in vllm_pd_engine_env and run deploy_pd.yml again'
                % (PREFIX, cfg['unit'], e))
            return EXIT_CONFIG
        try:
            res = check_free(g['kv_port'], g['tp_size'], g['dp_rank_start'], g['dp_size_local'], host_ip=host_ip,
                             npu_count=cfg['npu_count'], owner_unit=cfg['unit'], owner_container=cfg['container'],
                             container_engine=cfg['container_engine'], pp_size=g['pp_size'], pcp_size=g['pcp_size'],
                             ascend_base_port=win['ascend_base_port'], te_rpc_range=list(win['te_rpc']),
                             hccl_range=list(win['hccl']), extra_reserved=[str(p) for p in extra], ops=ops)
        except ParamError as e:
            log('%s: refused to start %s: %s; fix: run deploy_pd.yml again' % (PREFIX, cfg['unit'], e))
            return EXIT_CONFIG
        for f in res['findings']:
            if f['check'] == 'PortBusy':
                entries.append(finding_entry(f))
            else:
                clauses.append('[%s] %s' % (f['check'], f['msg']))
    if extra:
        entries.extend(holder_entry(h) for h in extra_port_holders(ops, cfg, host_ip, sorted(extra)))
    entries = [e for e in entries if still_blocks(ops, host_ip, e)]
    clauses = busy_clauses(host_ip, entries, lambda p: whats[p]) + clauses
    if clauses:
        log(refused(cfg, clauses))
        return EXIT_REFUSED
    return 0


def main(argv, env=None, ops=None, log=None, stream=None):
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
    return run(cfg, env, ops or GuardOps(), log)
