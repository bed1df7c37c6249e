# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pd_doctor mode=inspect: the reads of one PD host (engine processes, environment, the kv_port group's
listeners, the proxy, routes and path MTU to peers). Read-only; the diagnosis is doctor_findings.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import owners as owners_mod
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_launch import parse_launch
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model.pd_model import read_file, read_model_dir
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_host import (
    container_pids, net_env, parse_environ, parse_route_get, scan_log, unit_pids,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.env_file import parse_env_file
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import front_server
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_checks import build_holders, evaluate_listening
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_windows import DEFAULT_NPU_COUNT, reserved_windows
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import (
    detect_npu_count, parse_port_list, port_group, range_findings, read_sysctl_ranges,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.sockets import addresses_overlap, blocks_bind, read_tcp_sockets

PROC = '/proc'
SHOW_PROPS = ('LoadState', 'ActiveState', 'SubState', 'Result', 'MainPID', 'InvocationID', 'ActiveEnterTimestamp',
              'InactiveEnterTimestamp', 'ExecMainStatus', 'NRestarts')
TAIL = 8
# the variable vLLM's get_ip() reads (the table's host_ip_env: the same in every release it knows)
HOST_IP_ENV = runtime(None)['host_ip_env']


def _text(path):
    raw = read_file(path)
    return raw.decode('utf-8', 'replace') if raw is not None else None


class Host(object):
    """The reads of one inspect run (processes are scanned once)."""

    def __init__(self, module):
        self.module = module
        self._procs = None
        self._info = {}
        # on a host that is itself a container, its own processes are local, not "in a container"
        self._own = owners_mod.own_containers(PROC)

    def run(self, argv):
        rc, out, err = self.module.run_command(argv)
        return rc, out, err

    def tool(self, name):
        return self.module.get_bin_path(name)

    def procs(self):
        """{pid: (unit, ppid, container id)} of every visible process."""
        if self._procs is None:
            self._procs = {}
            for pid in owners_mod.list_pids(PROC):
                cg = owners_mod.parse_cgroup(_text('%s/%d/cgroup' % (PROC, pid)))
                container = owners_mod.container_from_cgroup_path(cg, self._own)
                self._procs[pid] = (owners_mod.unit_from_cgroup_path(cg),
                                    owners_mod.parse_stat_ppid(_text('%s/%d/stat' % (PROC, pid))),
                                    container['id'] if container else None)
        return self._procs

    def container(self, engine, name):
        """{'id', 'pid', 'name'} of container NAME, or None."""
        path = self.tool(engine)
        if not path:
            return None
        rc, out, _err = self.run([path, 'container', 'inspect', '--format', '{{.Id}} {{.State.Pid}} {{.Name}}', name])
        return owners_mod.parse_container_inspect(out) if rc == 0 else None

    def info(self, pid):
        if pid not in self._info:
            self._info[pid] = owners_mod.process_info(pid, PROC, self._own)
        return self._info[pid]

    def unit_show(self, unit):
        systemctl = self.tool('systemctl')
        if not systemctl:
            return dict(error='systemctl not found')
        argv = [systemctl, 'show']
        for p in SHOW_PROPS:
            argv += ['-p', p]
        rc, out, err = self.run(argv + ['--', unit])
        if rc != 0:
            return dict(error=(err or '').strip() or 'systemctl show failed (rc=%d)' % rc)
        return owners_mod.parse_systemctl_show(out)

    def journal(self, unit, invocation, lines):
        journalctl = self.tool('journalctl')
        if not journalctl:
            return None, 'journalctl not found'
        # only the current (or last) run of the unit: an old run's errors are history, not evidence
        match = ['_SYSTEMD_INVOCATION_ID=%s' % invocation] if invocation else ['-u', unit]
        rc, out, err = self.run([journalctl, '--no-pager', '-o', 'short-iso', '-n', str(lines)] + match)
        if rc != 0:
            return None, (err or '').strip() or 'journalctl failed (rc=%d)' % rc
        return [ln for ln in out.splitlines() if not ln.startswith('-- ')], None

    def ip(self, *args):
        ip = self.tool('ip')
        if not ip:
            return None
        rc, out, _err = self.run([ip, '-o'] + list(args))
        return out if rc == 0 else None


def engine_pids(host, unit, main_pid, container=None):
    procs = host.procs()
    parents = dict((p, pp) for p, (_u, pp, _c) in procs.items())
    pids = unit_pids(unit, dict((p, u) for p, (u, _pp, _c) in procs.items()), main_pid, parents)
    if container:
        pids = sorted(set(pids) | set(container_pids(container['id'], dict((p, c) for p, (_u, _pp, c) in procs.items()),
                                                     container['pid'], parents)))
    return pids


def inspect_group(host, eng, address, pids, env, params):
    ports = port_group(eng['kv_port'], eng['tp_size'], eng.get('pp_size', 1), eng.get('pcp_size', 1),
                       eng['dp_rank_start'], eng['dp_size'])
    socks = read_tcp_sockets(PROC, ports)
    listen = [s for s in socks if s['state'] == 'LISTEN']
    # connections on a port that has a listener are that listener's accepted connections: noise
    listened = set(s['port'] for s in listen)
    other = [s for s in socks if s['state'] != 'LISTEN' and s['port'] not in listened and blocks_bind(s, address)]
    owners = owners_mod.socket_owners(PROC, [s['inode'] for s in socks])
    pidset = set(pids)

    def is_engine(h):
        return any(p in pidset for p in h.get('pids') or [])

    holders = build_holders(listen, owners, host.info)
    ev = evaluate_listening(ports, address, holders, is_engine)
    blocking = [h for h in build_holders(other, owners, host.info) if not is_engine(h)]
    npu = params['npu_count'] or detect_npu_count('/dev') or DEFAULT_NPU_COUNT
    # the windows of the running engine's environment: the function the preflight and the start guard use
    try:
        win = reserved_windows(env, npu)
    except ValueError as exc:
        host.module.fail_json(msg='%s of %s; fix: correct it in vllm_pd_engine_env and run deploy_pd.yml' % (
            exc, eng['unit']))
    extra = []
    for item in params['extra_reserved']:
        try:
            extra.extend(parse_port_list(str(item)))
        except ValueError:
            host.module.fail_json(msg='extra_reserved item %r is not a port or a range like 9000-9010' % item)
    windows = [('AdxlWindow', 'AscendDirectTransport (ADXL/RDMA) window', win['adxl'],
                'Mooncake binds random ports there, so vLLM fails now and then with "Address already in use"'),
               ('TeRpcRange', 'Mooncake Transfer Engine RPC range', win['te_rpc'], 'the Transfer Engine binds there'),
               ('HcclRange', 'HCCL port range', win['hccl'], 'HCCL binds there')]
    ephemeral, reserved = read_sysctl_ranges(PROC)
    # listeners that do not block vLLM's bind but answer curl on another address (the Grafana trap)
    misleading = [h for h in holders if not is_engine(h) and not addresses_overlap(h['address'], h['family'], address)]
    return dict(ports=ports, address=address, ok=ev['ok'], closed=ev['closed'], foreign=ev['foreign'],
                wrong_address=ev['wrong_address'], misleading=misleading, blocking=blocking,
                engine_addresses=sorted(set(h['address'] for h in holders if is_engine(h))),
                windows=range_findings(ports, windows, ephemeral, reserved, extra))


def read_launch(pids, first):
    """The launch settings of the engine's 'vllm serve' process (FIRST tried first), with the facts of its
    model read through that process's root (a container sees its own files), or None."""
    for pid in [first] + [p for p in pids if p != first]:
        raw = read_file('%s/%d/cmdline' % (PROC, pid)) if pid else None
        argv = [w.decode('utf-8', 'replace') for w in raw.rstrip(b'\0').split(b'\0')] if raw else []
        launch = parse_launch(argv, parse_environ(read_file('%s/%d/environ' % (PROC, pid))))
        if launch is None:
            continue
        launch['pid'] = pid
        if launch['model']:
            launch['model_facts'] = read_model_dir(launch['model'],
                                                   lambda path, pid=pid: read_file('%s/%d/root%s' % (PROC, pid, path)))
        return launch
    return None


def inspect_engine(host, eng, params, host_facts):
    show = host.unit_show(eng['unit'])
    active = show.get('ActiveState') == 'active'
    try:
        main_pid = int(show.get('MainPID') or 0) or None
    except ValueError:
        main_pid = None
    container = host.container(eng.get('container_engine') or 'podman', eng['container']) \
        if active and eng.get('container') else None
    pids = engine_pids(host, eng['unit'], main_pid, container) if active else []
    # the container's init process has the environment vLLM runs with (--env-file), not the "run" client
    if container and container['pid'] in pids:
        pid = container['pid']
    else:
        pid = main_pid if main_pid in pids else (pids[0] if pids else None)
    env = None
    if pid:
        raw = read_file('%s/%d/environ' % (PROC, pid))
        env = net_env(parse_environ(raw)) if raw is not None else None
    file_env = None
    if eng.get('env_file'):
        text = _text(eng['env_file'])
        file_env = net_env(parse_env_file(text)) if text is not None else None
    out = dict(kind=eng['kind'], unit=eng['unit'], state=show, active=active, pid=pid, pids=pids,
               container=container,
               cmdline=host.info(pid).get('cmdline') if pid else None, env=env, env_file=file_env,
               env_readable=env is not None or not pid, launch=read_launch(pids, pid) if pid else None)
    lines, err = host.journal(eng['unit'], show.get('InvocationID'), params['log_lines'])
    out['logs'] = scan_log(lines, eng['kind'])
    out['log_error'] = err
    out['tail'] = (lines or [])[-TAIL:] if not active else []
    if eng.get('api_port'):
        socks = [s for s in read_tcp_sockets(PROC, [eng['api_port']]) if s['state'] == 'LISTEN']
        owners = owners_mod.socket_owners(PROC, [s['inode'] for s in socks])
        out['api_listening'] = sorted(set(s['address'] for s in socks
                                          if any(p in pids for p in owners.get(s['inode'], []))))
    if eng['kind'] == 'prefill' and eng.get('kv_port'):
        # the windows of the running engine's environment, else of the env file it will start with
        out['group'] = inspect_group(host, eng, params['address'], pids, env if env is not None else file_env, params)
    # what D would dial: VLLM_HOST_IP, else what the engine bound, else vLLM's default-route guess [facts §1]
    live = (env or {}).get(HOST_IP_ENV)
    conf = (file_env or {}).get(HOST_IP_ENV)
    bound = (out.get('group') or {}).get('engine_addresses') or []
    if live:
        adv = dict(address=live, source='%s of pid %d' % (HOST_IP_ENV, pid))
    elif bound:
        adv = dict(address=bound[0], source='address the engine listens on (%s unset)' % HOST_IP_ENV)
    elif not pid and conf:
        adv = dict(address=conf, source='%s of %s (engine not running)' % (HOST_IP_ENV, eng.get('env_file')))
    elif host_facts.get('default_src'):
        adv = dict(address=host_facts['default_src'],
                   source='default-route address on %s (vLLM auto-detection, %s unset)' % (
                       host_facts['default_dev'], HOST_IP_ENV))
    else:
        adv = dict(address=None, source='unknown')
    out['advertised'] = adv
    return out


def _haproxy_tier():
    return front_server.read_tier(lambda text: front_server.runtime_command(proxy_front.ADMIN_SOCKET, text))


def inspect_proxy(host, proxy, read_tier=_haproxy_tier):
    """The proxy's unit, its state and who listens on its port; for the proxy tier (front: true, the unit is HAProxy's)
    also HAProxy's view of each process of the proxy (front_server.read_tier), when HAProxy runs."""
    unit = proxy.get('unit') or 'vllm-pd-proxy.service'
    show = host.unit_show(unit)
    out = dict(unit=unit, port=proxy.get('port'), state=show, active=show.get('ActiveState') == 'active')
    if proxy.get('port'):
        socks = [s for s in read_tcp_sockets(PROC, [int(proxy['port'])]) if s['state'] == 'LISTEN']
        out['listening'] = sorted(set(s['address'] for s in socks))
    if proxy.get('front') and out['active']:
        out['tier'] = read_tier()
    return out


def inspect_peer(host, peer, mtus, want_ping):
    addr = peer.get('address')
    res = dict(host=peer.get('host'), address=addr, route=None, mtu=None, ping=None)
    if not addr:
        return res
    text = host.ip('route', 'get', addr)
    res['route'] = parse_route_get(text) if text is not None else dict(type='error', dev=None, src=None, via=None,
                                                                       mtu=None)
    route = res['route']
    res['route_text'] = ' '.join((text or '').split())
    res['mtu'] = route.get('mtu') or mtus.get(route.get('dev'))
    ping = host.tool('ping')
    if not want_ping or route.get('type') != 'unicast' or not res['mtu']:
        return res
    if not ping:
        res['ping'] = dict(ok=None, size=None, output='ping is not installed; path MTU not probed')
        return res
    size = res['mtu'] - (48 if ':' in addr else 28)
    rc, out, err = host.run([ping, '-n', '-c', '1', '-W', '2', '-M', 'do', '-s', str(size), addr])
    tail = [ln for ln in ((out or '') + (err or '')).splitlines() if ln.strip()][-3:]
    res['ping'] = dict(ok=rc == 0, size=size, output=' / '.join(tail))
    return res
