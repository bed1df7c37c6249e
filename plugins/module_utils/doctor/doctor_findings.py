# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The doctor's judgement: inspect/probe results of every host -> ordered findings per cluster.

Order is the field report's: step 1 VLLM_HOST_IP, step 2 the port group, step 3 reachability, MTU,
logs, stale files (step 0: the host could not be inspected at all). The first critical/error
finding of a cluster is its root cause; the later ones are its consequences.
Pure functions over plain data (the pd_doctor module's results).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_logs
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_launch import cluster_fit_findings
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_npu import npu_findings
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model.pd_consistency import CHECK_NAMES as FIT_CHECKS
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_checks import describe_holder
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import span
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.zmtp import REMEDY

# The variables the engine env file sets that step 1 reads (the table's host_ip_env and engine_env_names
# hccl_if_ip: the same in every release it knows).
HOST_IP_ENV = releases.runtime(None)['host_ip_env']
HCCL_IF_IP_ENV = releases.runtime(None)['engine_env_names']['hccl_if_ip']
STEPS = {
    0: 'inspection',
    1: HOST_IP_ENV,
    2: 'port group, NPU layer, P/D fit',
    3: 'reachability, MTU, logs, files',
}
# Within a step, checks are ordered by how directly they explain the failure.
CHECKS = (
    'HostUnreachable', 'AddressUnresolved', 'ClusterIncomplete',
    'EnvUnreadable', 'HostIpUnset', 'HostIpNotLocal', 'HostIpMismatch', 'AdvertisedUnreachable', 'HcclIfIp',
    'PortForeign', 'PortWrongAddress', 'PortClosed', 'PortWindow', 'PortMisleading',
) + FIT_CHECKS + ('KvConfigMismatch', 'TransferTimeoutShort') + (
    'EngineDown', 'LogKvThreadFailed', 'LogBindFailed', 'LogDeviceIpUnset', 'LogConfigConflict', 'LogVersionMismatch',
    'LogNpuMemoryTaken', 'ZmtpNotReachable', 'MtuMismatch', 'MtuPathBlocked', 'LogConnectFailed', 'LogTransferTimeout',
    'LogTransferFailed', 'LogSpecDecodeIndex', 'LogForceFreed', 'ApiNotListening', 'ProxyDown', 'ProxyTierUnread',
    'ProxyProcessDown', 'StaleFiles', 'MtuNotProbed',
)
SEVERITIES = ('critical', 'error', 'warning', 'info')
FAILING = ('critical', 'error')
KIND_RANK = dict(prefill=0, decode=1, proxy=2)
REACHED = ('zmq', 'refused', 'http', 'silent', 'closed', 'other')


def finding(cluster, host, step, check, severity, title, evidence, fix, kind=None):
    return dict(cluster=cluster, host=host, kind=kind, step=step, check=check, severity=severity, title=title,
                evidence=[e for e in evidence if e], fix=fix)


def _env_view(eng):
    """(env dict or None, where it was read) of an engine: the live process, else its env file."""
    if eng.get('pid') and eng.get('env') is not None:
        return eng['env'], '/proc/%d/environ of %s' % (eng['pid'], eng['unit'])
    if not eng.get('pid') and eng.get('env_file') is not None:
        return eng['env_file'], 'the environment file of %s (no engine process runs)' % eng['unit']
    return None, None


def _env_file_note(eng, want):
    f = eng.get('env_file')
    if f is None:
        return None
    have = f.get(HOST_IP_ENV)
    return 'environment file: %s=%s%s' % (
        HOST_IP_ENV, have if have else '(not set)', ' (right; the process predates it)' if have == want and eng.get('pid') else '')


def _restart_fix(eng, want, kind):
    f = (eng.get('env_file') or {}).get(HOST_IP_ENV)
    order = 'restart P before D' if kind == 'prefill' else 'D only needs a restart of itself'
    if f == want and eng.get('pid'):
        return ('the environment file already has %s=%s but the running process was started before it: '
                'systemctl restart %s (%s)' % (HOST_IP_ENV, want, eng['unit'], order))
    return ('set %s=%s (the inventory address) in the environment of %s: rerun playbooks/deploy_pd.yml, '
            'which writes it to /etc/vllm-pd/%s.env from vllm_pd_network / vllm_pd_host_ip, or export it in the '
            'start script; then restart the unit (%s)' % (HOST_IP_ENV, want, eng['unit'], kind, order))


def _host_ip_findings(cl, name, host, eng):
    out = []
    kind = eng['kind']
    want = (host.get('address') or {}).get('address')
    addrs = [a['address'] for a in (host.get('inspect') or {}).get('host', {}).get('addresses', [])]
    env, where = _env_view(eng)
    if eng.get('pid') and eng.get('env') is None:
        return [finding(cl, name, 1, 'EnvUnreadable', 'error',
                        'cannot read the environment of pid %d (%s)' % (eng['pid'], eng['unit']),
                        ['/proc/%d/environ is not readable' % eng['pid']],
                        'run the doctor with become (root) so /proc/PID/environ can be read', kind)]
    if env is None:
        return out
    value = env.get(HOST_IP_ENV) or ''
    adv = eng.get('advertised') or {}
    if not value:
        ev = ['%s: %s is not set' % (where, HOST_IP_ENV)]
        if adv.get('address'):
            ev.append('vLLM auto-detects instead: %s (%s)' % (adv['address'], adv.get('source')))
        ev.append(_env_file_note(eng, want) if eng.get('pid') else None)
        out.append(finding(cl, name, 1, 'HostIpUnset', 'critical',
                           '%s is not set for the %s engine on %s' % (HOST_IP_ENV, kind, name), ev,
                           _restart_fix(eng, want, kind), kind))
        return out
    if addrs and value not in addrs:
        blame = ('the inventory address itself is not on this host: fix vllm_pd_host_ip / vllm_pd_network '
                 '(pick the host\'s inter-node NIC address) and redeploy' if value == want else
                 _restart_fix(eng, want, kind))
        out.append(finding(cl, name, 1, 'HostIpNotLocal', 'critical',
                           '%s=%s is not an address of %s' % (HOST_IP_ENV, value, name),
                           ['%s: %s=%s' % (where, HOST_IP_ENV, value), 'addresses of %s: %s' % (name, ', '.join(addrs)),
                            'vLLM cannot bind it ("Cannot assign requested address") or binds nothing D can reach'],
                           blame, kind))
    elif want and value != want:
        out.append(finding(cl, name, 1, 'HostIpMismatch', 'critical',
                           '%s=%s on %s is not the inventory address %s' % (HOST_IP_ENV, value, name, want),
                           ['%s: %s=%s' % (where, HOST_IP_ENV, value),
                            'inventory address (vllm_pd_address): %s on %s' % (
                                want, (host.get('address') or {}).get('interface')),
                            _env_file_note(eng, want) if eng.get('pid') else None],
                           _restart_fix(eng, want, kind), kind))
    hccl = env.get(HCCL_IF_IP_ENV)
    if hccl and want and hccl != want and value == want:
        out.append(finding(cl, name, 1, 'HcclIfIp', 'warning',
                           '%s=%s differs from %s=%s on %s' % (HCCL_IF_IP_ENV, hccl, HOST_IP_ENV, value, name),
                           ['%s: %s=%s' % (where, HCCL_IF_IP_ENV, hccl)],
                           'set %s to the same inter-node address (deploy_pd.yml writes both)' % HCCL_IF_IP_ENV, kind))
    return out


def _advertised_findings(cl, dname, target, p_name):
    """Step 1: can D reach the address P advertises at all; step 3: does every port answer ZMTP."""
    out = []
    addr = target.get('address')
    route = target.get('route') or {}
    probes = target.get('probes') or []
    lines = ['%s:%d %s (%s)' % (addr, r['port'], r['result'], r.get('detail', '')) for r in probes
             if r['result'] != 'zmq']
    route_ev = 'ip -o route get %s on %s: %s' % (addr, dname, target.get('route_text') or route.get('type'))
    if not addr:
        return [finding(cl, dname, 1, 'AdvertisedUnreachable', 'critical',
                        '%s advertises no usable address' % p_name,
                        ['no VLLM_HOST_IP, no listener and no default route on %s' % p_name],
                        'set VLLM_HOST_IP on %s to its inter-node address' % p_name, 'decode')]
    if route.get('type') == 'local':
        return [finding(cl, dname, 1, 'AdvertisedUnreachable', 'critical',
                        '%s advertises %s, which is an address of %s itself: D would dial itself' % (
                            p_name, addr, dname),
                        [route_ev, 'loopback, docker0 and other host-local addresses exist on every host'],
                        'set VLLM_HOST_IP on %s to its inter-node address (the inventory address)' % p_name,
                        'decode')]
    reached = [r for r in probes if r['result'] in REACHED]
    if route.get('type') not in ('unicast', None) or (probes and not reached):
        out.append(finding(cl, dname, 1, 'AdvertisedUnreachable', 'critical',
                           '%s cannot reach %s at the address it advertises, %s' % (dname, p_name, addr),
                           [route_ev] + lines[:4] + (['... %d more port(s)' % (len(lines) - 4)] if len(lines) > 4
                                                     else []),
                           'make %s reachable from %s on the data network (route, firewall, VLAN), or, if %s is not '
                           'its inter-node address, fix VLLM_HOST_IP on %s' % (addr, dname, addr, p_name), 'decode'))
        return out
    bad = [r for r in probes if r['result'] != 'zmq']
    if bad:
        kinds = sorted(set(r['result'] for r in bad))
        out.append(finding(cl, dname, 3, 'ZmtpNotReachable', 'critical',
                           '%d of %d port(s) of %s\'s group give no ZMTP greeting from %s' % (
                               len(bad), len(probes), p_name, dname),
                           lines, '; '.join('%s: %s' % (k, REMEDY.get(k, k)) for k in kinds), 'decode'))
    return out


def _group_findings(cl, name, eng):
    g = eng.get('group')
    if not g:
        return []
    out = []
    kind = eng['kind']
    foreign = (g.get('foreign') or []) + (g.get('blocking') or [])
    if foreign:
        ports = sorted(set(h['port'] for h in foreign))
        units = sorted(set(h['unit'] for h in foreign if h.get('unit')))
        fix = ('stop what holds the port(s) (%s), or add it to vllm_pd_stop_services and rerun deploy_pd.yml, or '
               'move kv_port to a free range; then restart %s (P before D)' % (
                   ', '.join('systemctl stop %s' % u for u in units) or 'kill the pid named above', eng['unit']))
        out.append(finding(cl, name, 2, 'PortForeign', 'critical',
                           'port(s) %s of the kv_port group on %s are held by another process, not by %s' % (
                               span(ports), name, eng['unit']),
                           [describe_holder(h) for h in foreign], fix, kind))
    if g.get('wrong_address'):
        addrs = sorted(set(h['address'] for h in g['wrong_address']))
        out.append(finding(cl, name, 2, 'PortWrongAddress', 'critical',
                           'the %s engine listens on %s, not on %s' % (kind, ', '.join(addrs), g['address']),
                           [describe_holder(h) for h in g['wrong_address'][:4]],
                           'VLLM_HOST_IP decides the bind address: fix it (step 1) and restart %s' % eng['unit'],
                           kind))
    held = set(h['port'] for h in foreign) | set(h['port'] for h in g.get('wrong_address') or [])
    closed = [p for p in g.get('closed') or [] if p not in held]
    if closed and eng.get('active'):
        up = len(g['ports']) - len(g['closed'])
        out.append(finding(cl, name, 2, 'PortClosed', 'critical',
                           'port(s) %s of the group do not listen on %s (%d of %d up)' % (
                               span(closed), g['address'], up, len(g['ports'])),
                           ['no listener on %s:%d' % (g['address'], p) for p in closed[:4]],
                           'the worker(s) of those ranks did not bind: read journalctl -u %s for "KVCacheSendingThread"'
                           ' errors and check tp_size/dp_size against what the engine launches' % eng['unit'], kind))
    for w in g.get('windows') or []:
        sev = 'warning' if w['check'] == 'EphemeralRange' else 'error'
        out.append(finding(cl, name, 2, 'PortWindow', sev, 'the group %s: %s' % (span(g['ports']), w['check']),
                           [w['msg']], 'move vllm_pd_kv_port (e.g. 28002 with 8 NPUs), or as the message says',
                           kind))
    if g.get('misleading'):
        out.append(finding(cl, name, 2, 'PortMisleading', 'warning',
                           'other listeners on group port(s) of %s answer curl/nc on another address' % name,
                           [describe_holder(h) for h in g['misleading']],
                           'they do not block vLLM, but a check with curl or nc on that address is no proof; verify '
                           'with ss -tlnp on %s or this doctor' % g['address'], kind))
    return out


LOG_FIX = doctor_logs.FIX


def _engine_step3(cl, name, eng):
    out = []
    kind = eng['kind']
    st = eng.get('state') or {}
    if not eng.get('active'):
        out.append(finding(cl, name, 3, 'EngineDown', 'critical', '%s is not running on %s' % (eng['unit'], name),
                           ['systemctl show %s: ActiveState=%s SubState=%s Result=%s ExecMainStatus=%s since %s' % (
                               eng['unit'], st.get('ActiveState'), st.get('SubState'), st.get('Result'),
                               st.get('ExecMainStatus'), st.get('InactiveEnterTimestamp') or '?')]
                           + (eng.get('tail') or [])[-4:],
                           'fix the cause in its log (journalctl -u %s), then systemctl start %s' % (
                               eng['unit'], eng['unit']), kind))
    for hint in eng.get('logs') or []:
        f = finding(cl, name, 3, hint['check'], hint['severity'],
                    '%s logged "%s" %d time(s)' % (eng['unit'], hint['text'], hint['count']),
                    (['first: ' + hint['first']] if hint.get('first') and hint['first'] not in hint['lines'] else [])
                    + hint['lines'], LOG_FIX.get(hint['check'], ''), kind)
        if 'first_index' in hint:  # doctor_logs.earliest_first orders the log findings by it
            f.update(first_index=hint['first_index'], first_time=hint.get('first_time'))
        out.append(f)
    if eng.get('active') and 'api_listening' in eng and not eng['api_listening']:
        out.append(finding(cl, name, 3, 'ApiNotListening', 'warning',
                           'the API port of %s does not listen (yet)' % eng['unit'],
                           ['no listener of the engine on its API port'],
                           'wait for the model load to finish; if it never does, read journalctl -u %s' % eng['unit'],
                           kind))
    return out


def _mtu_findings(cl, name, host, hosts):
    out = []
    for peer in (host.get('inspect') or {}).get('peers') or []:
        ping = peer.get('ping') or {}
        other = hosts.get(peer.get('host')) or {}
        back = [q for q in (other.get('inspect') or {}).get('peers') or [] if q.get('host') == name]
        mine, theirs = peer.get('mtu'), back[0].get('mtu') if back else None
        if mine and theirs and mine != theirs:
            out.append(finding(cl, name, 3, 'MtuMismatch', 'error',
                               'MTU differs along %s <-> %s: %d here, %d on %s' % (
                                   name, peer['host'], mine, theirs, peer['host']),
                               ['ip -o route get %s: %s' % (peer['address'], peer.get('route_text')),
                                '%s towards %s: mtu %s' % (peer['host'], name, theirs)],
                               'set the same MTU on both data NICs (and every switch port between them)'))
        if ping.get('ok') is False:
            out.append(finding(cl, name, 3, 'MtuPathBlocked', 'error',
                               'a %d-byte unfragmentable ping from %s to %s (%s) fails' % (
                                   ping.get('size') or 0, name, peer['host'], peer['address']),
                               [ping.get('output')],
                               'a hop between them has a smaller MTU or drops ICMP: align the MTU along the path'))
        elif ping.get('ok') is None and ping.get('output'):
            out.append(finding(cl, name, 3, 'MtuNotProbed', 'info',
                               'path MTU to %s not probed' % peer['host'], [ping['output']],
                               'install iputils-ping to let the doctor probe the path MTU'))
    return out


def _fit_findings(cl, members, hosts):
    """P/D fit of what the engines run (their argv and environment), by the preflight's rules."""
    engines = []
    for name in members:
        for eng in (hosts[name].get('inspect') or {}).get('engines') or []:
            engines.append(dict(host=name, kind=eng['kind'], launch=eng.get('launch'),
                                address=(eng.get('env') or {}).get(HOST_IP_ENV)
                                or (hosts[name].get('address') or {}).get('address')))
    out = []
    for f in cluster_fit_findings(engines):
        title, _sep, fix = f['message'][len('[%s] ' % f['name']):].partition('. Fix: ')
        out.append(finding(cl, (f.get('hosts') or members)[0], 2, f['name'], 'warning' if f.get('warning') else 'error',
                           title, ['read from the running engines (argv and environment): ' + ', '.join(f.get('hosts') or [])],
                           fix or 'redeploy P and D from one inventory (the preflight checks they fit)'))
    return out


def _tier_findings(cl, name, px):
    """The proxy tier's processes as HAProxy sees them (px['tier'], read while HAProxy runs): a process out of
    HAProxy (DOWN, MAINT) is capacity lost, an error once no process serves (every request then fails)."""
    tier = px.get('tier')
    if not tier:
        return []
    if tier['front'] != 'running':
        return [finding(cl, name, 3, 'ProxyTierUnread', 'warning',
                        "HAProxy's runtime API on %s did not tell the state of the proxy's processes" % name,
                        [tier.get('error')], 'journalctl -u %s; then rerun the doctor' % px['unit'], 'proxy')]
    out = [p for p in tier['processes'] if p['status'].startswith(('DOWN', 'MAINT'))]
    if not out:
        return []
    serving = len(tier['processes']) - len(out)
    return [finding(cl, name, 3, 'ProxyProcessDown', 'warning' if serving else 'error',
                    '%d of %d processes of the proxy on %s are out of HAProxy%s' % (
                        len(out), len(tier['processes']), name,
                        '' if serving else ': no process serves, every request fails'),
                    ['%s (HAProxy server %s): %s, last health check %s %s' % (
                        p['unit'] or '?', p['server'], p['status'], p['check'], p['last_check']) for p in out],
                    'journalctl -u %s; systemctl restart the unit or run deploy_pd.yml again (it starts every process '
                    'of the tier)' % ' -u '.join(p['unit'] or p['server'] for p in out), 'proxy')]


def _order_key(f, host_order):
    return (f['step'], CHECKS.index(f['check']) if f['check'] in CHECKS else len(CHECKS),
            KIND_RANK.get(f.get('kind'), 3), host_order.get(f['host'], 999), SEVERITIES.index(f['severity']))


def _group_summary(eng):
    g = eng.get('group')
    if not g:
        return None
    return dict(span=span(g['ports']), up=len(set(h['port'] for h in g.get('ok') or [])), total=len(g['ports']),
                address=g['address'], foreign=sorted(set(h['port'] for h in g.get('foreign') or [])))


def _host_card(name, host):
    ins = host.get('inspect') or {}
    card = dict(name=name, roles=host.get('groups') or [], address=(host.get('address') or {}).get('address'),
                interface=(host.get('address') or {}).get('interface'), reachable=bool(ins), engines=[], proxy=None)
    for eng in ins.get('engines') or []:
        env, _where = _env_view(eng)
        card['engines'].append(dict(kind=eng['kind'], unit=eng['unit'], active=eng.get('active'),
                                    state=(eng.get('state') or {}).get('ActiveState'), pid=eng.get('pid'),
                                    vllm_host_ip=(env or {}).get(HOST_IP_ENV) if env is not None else None,
                                    env_known=env is not None, advertised=(eng.get('advertised') or {}).get('address'),
                                    group=_group_summary(eng)))
    if ins.get('proxy'):
        px = ins['proxy']
        card['proxy'] = dict(unit=px['unit'], port=px.get('port'), active=px.get('active'),
                             state=(px.get('state') or {}).get('ActiveState'), tier=px.get('tier'))
    return card


def diagnose(hosts):
    """hosts: {name: {cluster, groups, address, address_error, unreachable, inspect, probe, residue}}.

    Returns (findings in order with 'role', clusters [{name, status, root_cause, hosts, links, counts}]).
    """
    clusters = {}
    for name in hosts:
        clusters.setdefault(hosts[name].get('cluster') or '(no cluster)', []).append(name)
    all_findings, out_clusters = [], []
    for cl in sorted(clusters):
        members = clusters[cl]
        order = dict((n, i) for i, n in enumerate(members))
        fs = []
        ps = [n for n in members if 'prefill' in (hosts[n].get('groups') or [])]
        ds = [n for n in members if 'decode' in (hosts[n].get('groups') or [])]
        if not ps or not ds:
            fs.append(finding(cl, members[0], 0, 'ClusterIncomplete', 'critical',
                              'cluster %s has %d prefill and %d decode host(s) in this run' % (cl, len(ps), len(ds)),
                              ['prefill: %s; decode: %s' % (', '.join(ps) or '-', ', '.join(ds) or '-')],
                              'put both sides in the inventory with the same vllm_pd_cluster (and in --limit)'))
        links = []
        for name in members:
            h = hosts[name]
            if h.get('unreachable') or (not h.get('inspect') and not h.get('address_error')):
                fs.append(finding(cl, name, 0, 'HostUnreachable', 'critical', '%s could not be inspected' % name,
                                  [h.get('unreachable') if isinstance(h.get('unreachable'), str) else
                                   'no inspect result (host unreachable or the task failed)'],
                                  'check SSH and become on %s, then rerun the doctor' % name))
                continue
            if h.get('address_error'):
                fs.append(finding(cl, name, 0, 'AddressUnresolved', 'critical',
                                  'the inventory address of %s cannot be resolved' % name, [h['address_error']],
                                  'set vllm_pd_network (the inter-node CIDR), vllm_pd_host_ip or vllm_pd_interface'))
            for eng in (h.get('inspect') or {}).get('engines') or []:
                fs += _host_ip_findings(cl, name, h, eng)
                fs += _group_findings(cl, name, eng)
                fs += _engine_step3(cl, name, eng)
            px = (h.get('inspect') or {}).get('proxy')
            if px and not px.get('active'):
                fs.append(finding(cl, name, 3, 'ProxyDown', 'error', '%s is not running on %s' % (px['unit'], name),
                                  ['ActiveState=%s' % (px.get('state') or {}).get('ActiveState')],
                                  'systemctl start %s (after P and D are healthy)' % px['unit'], 'proxy'))
            if px and px.get('active'):
                fs += _tier_findings(cl, name, px)
            fs += _mtu_findings(cl, name, h, hosts)
            stale = (h.get('residue') or {}).get('removed') or []
            if stale:
                fs.append(finding(cl, name, 3, 'StaleFiles', 'warning',
                                  '%d stale Mooncake file(s) on %s that no process holds' % (len(stale), name),
                                  stale[:6] + (['... %d more' % (len(stale) - 6)] if len(stale) > 6 else []),
                                  'stop the engines and run the preflight (deploy_pd.yml clears them), or remove them'))
            for t in (h.get('probe') or {}).get('targets') or []:
                if t.get('what', 'advertised') != 'advertised':
                    continue
                fs += _advertised_findings(cl, name, t, t.get('host'))
                probes = t.get('probes') or []
                ok = len([r for r in probes if r['result'] == 'zmq'])
                links.append(dict(decode=name, prefill=t.get('host'), address=t.get('address'), ok=ok,
                                  total=len(probes), status='ok' if probes and ok == len(probes) else
                                  ('partial' if ok else 'down')))
        fs += npu_findings(cl, members, hosts)
        fs += _fit_findings(cl, members, hosts)
        fs.sort(key=lambda f: _order_key(f, order))
        fs = doctor_logs.earliest_first(fs)  # the earliest log signature is the cause, not the last exception
        root = None
        for f in fs:
            if f['severity'] in FAILING:
                f['role'] = 'root cause' if root is None else 'consequence'
                root = root or f
            else:
                f['role'] = 'note'
        counts = dict((s, len([f for f in fs if f['severity'] == s])) for s in SEVERITIES)
        status = 'failing' if root else ('warnings' if counts['warning'] else 'healthy')
        out_clusters.append(dict(name=cl, status=status, root_cause=root, counts=counts, links=links,
                                 hosts=[_host_card(n, hosts[n]) for n in members]))
        all_findings += fs
    return all_findings, out_clusters
