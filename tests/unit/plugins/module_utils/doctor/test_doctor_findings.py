# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Finding order and root cause over hand-built inspect/probe results of a P + D cluster."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_findings import diagnose

P_IP, D_IP, P_MGMT = '10.0.30.10', '10.0.30.11', '172.30.31.10'
PORTS = list(range(28002, 28010))


def holder(port, address, pid=100, unit='vllm-pd-prefill.service', process='vllm'):
    return dict(port=port, address=address, family='tcp', state='LISTEN', inode=1000 + port,
                endpoint='%s:%d' % (address, port), pids=[pid], pid=pid, process=process,
                cmdline='/usr/bin/%s serve' % process, unit=unit, container=None)


def prefill_engine():
    env = {'VLLM_HOST_IP': P_IP, 'HCCL_IF_IP': P_IP}
    return dict(kind='prefill', unit='vllm-pd-prefill.service', active=True, pid=100, pids=[100],
                state=dict(ActiveState='active', SubState='running', Result='success'),
                env=dict(env), env_file=dict(env), advertised=dict(address=P_IP, source='VLLM_HOST_IP of pid 100'),
                logs=[], tail=[], api_listening=[P_IP],
                group=dict(ports=list(PORTS), address=P_IP, ok=[holder(p, P_IP) for p in PORTS], closed=[],
                           foreign=[], wrong_address=[], misleading=[], blocking=[], engine_addresses=[P_IP],
                           windows=[]))


def decode_engine():
    env = {'VLLM_HOST_IP': D_IP}
    return dict(kind='decode', unit='vllm-pd-decode.service', active=True, pid=200, pids=[200],
                state=dict(ActiveState='active'), env=dict(env), env_file=dict(env),
                advertised=dict(address=D_IP, source='VLLM_HOST_IP of pid 200'), logs=[], tail=[],
                api_listening=[D_IP])


def probes(address, result='zmq'):
    return [dict(port=p, host=address, result=result, detail='d') for p in PORTS]


def cluster(name='c1', p='p1', d='d1'):
    def addrs(*ips):
        return [dict(ifname='data0', family='inet', address=ip, prefix=24) for ip in ips]
    return {
        p: dict(cluster=name, groups=['prefill', 'proxy'], address=dict(address=P_IP, interface='data0'),
                inspect=dict(host=dict(addresses=addrs(P_IP, P_MGMT, '127.0.0.1')), engines=[prefill_engine()],
                             proxy=dict(unit='vllm-pd-proxy.service', port=8000, active=True,
                                        state=dict(ActiveState='active')),
                             peers=[dict(host=d, address=D_IP, mtu=1500, ping=None)]),
                probe=None, residue=dict(removed=[])),
        d: dict(cluster=name, groups=['decode'], address=dict(address=D_IP, interface='data0'),
                inspect=dict(host=dict(addresses=addrs(D_IP, '127.0.0.1')), engines=[decode_engine()],
                             peers=[dict(host=p, address=P_IP, mtu=1500, ping=None)]),
                probe=dict(targets=[dict(host=p, address=P_IP, ports=PORTS, what='advertised',
                                         route=dict(type='unicast', dev='data0'), route_text='%s dev data0' % P_IP,
                                         probes=probes(P_IP))]),
                residue=dict(removed=[])),
    }


def eng(hosts, name):
    return hosts[name]['inspect']['engines'][0]


def run(hosts):
    findings, clusters = diagnose(hosts)
    return findings, dict((c['name'], c) for c in clusters)


def checks(findings, role=None):
    return [f['check'] for f in findings if role is None or f['role'] == role]


def set_unset_ip_on_p(hosts):
    e = eng(hosts, 'p1')
    del e['env']['VLLM_HOST_IP']
    del e['env_file']['VLLM_HOST_IP']
    e['advertised'] = dict(address=P_MGMT, source='address the engine listens on (VLLM_HOST_IP unset)')
    e['group'].update(ok=[], wrong_address=[holder(p, P_MGMT) for p in PORTS], engine_addresses=[P_MGMT])
    t = hosts['d1']['probe']['targets'][0]
    t.update(address=P_MGMT, probes=probes(P_MGMT, 'unreachable'), route=dict(type='unicast', dev='mgmt0'))


def test_healthy_cluster_has_no_root_cause():
    findings, cl = run(cluster())
    assert cl['c1']['status'] == 'healthy' and cl['c1']['root_cause'] is None and findings == []
    assert cl['c1']['links'] == [dict(decode='d1', prefill='p1', address=P_IP, ok=8, total=8, status='ok')]
    card = cl['c1']['hosts'][0]
    assert card['engines'][0]['group'] == dict(span='28002-28009', up=8, total=8, address=P_IP, foreign=[])


def test_unset_ip_is_root_cause_and_the_rest_are_consequences():
    hosts = cluster()
    set_unset_ip_on_p(hosts)
    findings, cl = run(hosts)
    root = cl['c1']['root_cause']
    assert (root['check'], root['host'], root['step'], root['role']) == ('HostIpUnset', 'p1', 1, 'root cause')
    assert checks(findings) == ['HostIpUnset', 'AdvertisedUnreachable', 'PortWrongAddress']
    assert checks(findings, 'consequence') == ['AdvertisedUnreachable', 'PortWrongAddress']
    assert any(P_MGMT in e for e in root['evidence'])
    assert 'VLLM_HOST_IP=%s' % P_IP in root['fix'] and 'deploy_pd.yml' in root['fix']
    assert cl['c1']['links'][0]['status'] == 'down'


def test_stale_process_gets_a_restart_fix():
    hosts = cluster()
    set_unset_ip_on_p(hosts)
    eng(hosts, 'p1')['env_file']['VLLM_HOST_IP'] = P_IP      # file fixed, process not restarted
    root = run(hosts)[1]['c1']['root_cause']
    assert root['check'] == 'HostIpUnset' and 'systemctl restart vllm-pd-prefill.service' in root['fix']


def test_wrong_ip_local_and_not_local():
    hosts = cluster()
    eng(hosts, 'p1')['env']['VLLM_HOST_IP'] = P_MGMT
    root = run(hosts)[1]['c1']['root_cause']
    assert (root['check'], root['host']) == ('HostIpMismatch', 'p1')
    hosts = cluster()
    eng(hosts, 'd1')['env']['VLLM_HOST_IP'] = '10.9.9.9'
    root = run(hosts)[1]['c1']['root_cause']
    assert (root['check'], root['host']) == ('HostIpNotLocal', 'd1')


def test_engine_down_reads_the_env_file():
    hosts = cluster()
    e = eng(hosts, 'p1')
    e.update(active=False, pid=None, pids=[], env=None, state=dict(ActiveState='failed', SubState='failed'))
    e['env_file']['VLLM_HOST_IP'] = '10.0.30.99'
    e['group'].update(ok=[], closed=list(PORTS))
    findings, cl = run(hosts)
    assert checks(findings)[:2] == ['HostIpNotLocal', 'EngineDown']
    assert 'environment file' in cl['c1']['root_cause']['evidence'][0]
    assert 'PortClosed' not in checks(findings)     # closed because the engine is down: not a separate fault


def test_port_taken_while_engine_down_is_root_cause_before_engine_down():
    hosts = cluster()
    e = eng(hosts, 'p1')
    e.update(active=False, pid=None, pids=[], env=None, state=dict(ActiveState='failed'),
             logs=[dict(check='LogKvThreadFailed', text='KV Cache sending/receiving thread failed to start.',
                        severity='critical', count=1, lines=['2026-12-02T14:00:00+0000 p1 vllm[1]: RuntimeError'])])
    grafana = holder(28005, '0.0.0.0', pid=300, unit='grafana-server.service', process='grafana')
    e['group'].update(ok=[], closed=list(PORTS), foreign=[grafana])
    hosts['d1']['probe']['targets'][0]['probes'] = probes(P_IP, 'refused')
    findings, cl = run(hosts)
    root = cl['c1']['root_cause']
    assert (root['check'], root['step']) == ('PortForeign', 2)
    assert '28005' in root['title'] and 'grafana-server.service' in root['evidence'][0]
    assert 'systemctl stop grafana-server.service' in root['fix']
    assert checks(findings, 'consequence') == ['EngineDown', 'LogKvThreadFailed', 'ZmtpNotReachable']


def test_both_faults_name_the_address_first():
    hosts = cluster()
    set_unset_ip_on_p(hosts)
    eng(hosts, 'p1')['group']['foreign'] = [holder(28005, '0.0.0.0', 300, 'grafana-server.service', 'grafana')]
    findings, cl = run(hosts)
    assert cl['c1']['root_cause']['check'] == 'HostIpUnset'
    assert 'PortForeign' in checks(findings, 'consequence')


def test_decode_cannot_reach_prefill():
    hosts = cluster()
    t = hosts['d1']['probe']['targets'][0]
    t['probes'] = probes(P_IP, 'timeout')
    root = run(hosts)[1]['c1']['root_cause']
    assert (root['check'], root['host'], root['step']) == ('AdvertisedUnreachable', 'd1', 1)
    t['route'] = dict(type='local', dev='lo')
    t['address'] = '172.17.0.1'
    root = run(hosts)[1]['c1']['root_cause']
    assert root['check'] == 'AdvertisedUnreachable' and 'dial itself' in root['title']


def test_http_on_one_port_is_a_step3_zmtp_finding():
    hosts = cluster()
    t = hosts['d1']['probe']['targets'][0]
    t['probes'][3] = dict(port=28005, host=P_IP, result='http', detail='HTTP server answered: HTTP/1.0 200 OK')
    root = run(hosts)[1]['c1']['root_cause']
    assert (root['check'], root['step']) == ('ZmtpNotReachable', 3)
    assert 'Grafana' in root['fix'] and '28005 http' in root['evidence'][0]


def test_windows_misleading_and_stale_files():
    hosts = cluster()
    g = eng(hosts, 'p1')['group']
    g['windows'] = [dict(check='EphemeralRange', ports=PORTS, msg='in the ephemeral range')]
    g['misleading'] = [holder(28004, '127.0.0.1', 400, None, 'python3')]
    hosts['p1']['residue']['removed'] = ['/dev/shm/mooncake_seg_0']
    findings, cl = run(hosts)
    assert cl['c1']['status'] == 'warnings' and cl['c1']['root_cause'] is None
    assert checks(findings, 'note') == ['PortWindow', 'PortMisleading', 'StaleFiles']
    g['windows'] = [dict(check='AdxlWindow', ports=PORTS, msg='inside ADXL')]
    assert run(hosts)[1]['c1']['root_cause']['check'] == 'PortWindow'


def test_logs_mtu_and_proxy():
    hosts = cluster()
    eng(hosts, 'p1')['logs'] = [dict(check='LogForceFreed', text='Force freed expired request:', severity='error',
                                     count=2, lines=['2026-12-02T14:00:00+0000 p1 vllm[1]: Force freed expired '
                                                     'request: r1'])]
    hosts['d1']['inspect']['peers'][0]['mtu'] = 9000
    hosts['p1']['inspect']['proxy'].update(active=False, state=dict(ActiveState='failed'))
    findings, cl = run(hosts)
    assert checks(findings) == ['MtuMismatch', 'MtuMismatch', 'LogForceFreed', 'ProxyDown']
    assert cl['c1']['root_cause']['host'] == 'p1'
    assert findings[2]['evidence'][0].startswith('2026-12-02T14:00:00')


def tier(*statuses):
    return dict(front='running', error=None, processes=[
        dict(server='proxy%d' % k, unit='vllm-pd-proxy@%d.service' % k, status=status, in_flight=0, queued=0,
             errors_5xx=0, check='L4CON' if status == 'DOWN' else 'L7OK', last_check='Connection refused')
        for k, status in enumerate(statuses, 1)])


def test_the_proxy_tier_names_a_process_out_of_haproxy_and_haproxy_down_first():
    hosts = cluster()
    front = dict(unit='vllm-pd-front.service', port=8000, active=True, state=dict(ActiveState='active'))
    # every process UP (one draining for a recycle): healthy, the card shows HAProxy's view
    hosts['p1']['inspect']['proxy'] = dict(front, tier=tier('UP', 'DRAIN'))
    findings, cl = run(hosts)
    assert findings == [] and cl['c1']['status'] == 'healthy'
    assert [p['status'] for p in cl['c1']['hosts'][0]['proxy']['tier']['processes']] == ['UP', 'DRAIN']
    # one of two out: capacity lost, service goes on (a warning naming the unit and HAProxy's last check)
    hosts['p1']['inspect']['proxy'] = dict(front, tier=tier('UP', 'DOWN'))
    findings, cl = run(hosts)
    assert checks(findings) == ['ProxyProcessDown'] and findings[0]['severity'] == 'warning'
    assert findings[0]['title'] == '1 of 2 processes of the proxy on p1 are out of HAProxy'
    assert findings[0]['evidence'] == ['vllm-pd-proxy@2.service (HAProxy server proxy2): DOWN, last health check '
                                       'L4CON Connection refused']
    assert 'journalctl -u vllm-pd-proxy@2.service' in findings[0]['fix']
    # every process out: every request fails, the root cause
    hosts['p1']['inspect']['proxy'] = dict(front, tier=tier('DOWN', 'MAINT'))
    findings, cl = run(hosts)
    assert checks(findings) == ['ProxyProcessDown'] and cl['c1']['root_cause']['severity'] == 'error'
    assert findings[0]['title'].endswith('no process serves, every request fails')
    # HAProxy's runtime API silent: said, not guessed
    hosts['p1']['inspect']['proxy'] = dict(front, tier=dict(front='unreadable', error='timed out', processes=[]))
    assert checks(run(hosts)[0]) == ['ProxyTierUnread']
    # HAProxy down: the proxy is down, whatever its processes do (not read), the root cause
    hosts['p1']['inspect']['proxy'] = dict(front, active=False, state=dict(ActiveState='failed'))
    findings, cl = run(hosts)
    assert checks(findings) == ['ProxyDown'] and cl['c1']['root_cause']['title'] == (
        'vllm-pd-front.service is not running on p1')


def test_unreachable_host_and_incomplete_cluster():
    hosts = cluster()
    hosts['d1'] = dict(cluster='c1', groups=['decode'], unreachable='ssh: connect refused')
    root = run(hosts)[1]['c1']['root_cause']
    assert (root['check'], root['step'], root['evidence']) == ('HostUnreachable', 0, ['ssh: connect refused'])
    hosts = cluster()
    del hosts['d1']
    hosts['p1']['probe'] = None
    assert run(hosts)[1]['c1']['root_cause']['check'] == 'ClusterIncomplete'


def test_clusters_are_judged_apart_and_p_comes_before_d():
    hosts = cluster('c1')
    other = cluster('c2', 'p2', 'd2')
    for e in (eng(other, 'p2'), eng(other, 'd2')):
        e['env']['VLLM_HOST_IP'] = '10.7.7.7'
    hosts.update(copy.deepcopy(other))
    findings, cl = run(hosts)
    assert cl['c1']['status'] == 'healthy'
    assert [(f['check'], f['host']) for f in findings if f['cluster'] == 'c2'] == [
        ('HostIpNotLocal', 'p2'), ('HostIpNotLocal', 'd2')]
