# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drive the real kv_port_group main() against real sockets opened by the tests."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import os
import socket
import threading
import time

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import sock_diag
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_checks import build_holders, plan_stops
from ansible_collections.vllm_pd.ascend.plugins.modules import kv_port_group as M

HOST = '127.0.0.2'


def args(ports, **kw):
    a = dict(kv_port=ports[0], tp_size=len(ports), host_ip=HOST, npu_count=8, state='free')
    a.update(kw)
    return a


@pytest.fixture
def fake_units(monkeypatch):
    """{pid: unit} overrides of the cgroup-derived unit (stands in for a real systemd unit)."""
    units = {}
    orig = M.HostOps.process_info

    def process_info(self, pid):
        info = dict(orig(self, pid))
        if pid in units:
            info['unit'] = units[pid]
        return info
    monkeypatch.setattr(M.HostOps, 'process_info', process_info)
    return units


@pytest.fixture
def fake_systemctl(monkeypatch):
    """systemctl stop UNIT terminates the test's own child that plays UNIT."""
    state = dict(calls=[], children={}, show={})

    def stop_unit(self, unit):
        state['calls'].append(unit)
        child = state['children'].get(unit)
        if child is None:
            return 5, 'Unit %s not loaded.' % unit
        child.stop()
        return 0, ''

    def unit_show(self, unit):
        return state['show'].get(unit, dict(LoadState='not-found', ActiveState='inactive'))

    def unit_state(self, unit):
        # the state read before a stop (holders_off): a disabled unit, so nothing gets disabled here
        return dict(Id=unit, LoadState='loaded', ActiveState='active', UnitFileState='disabled')

    def disable_unit(self, unit, extra=()):
        state['calls'].append('disable ' + unit)
        return 0, ''
    monkeypatch.setattr(M.HostOps, 'stop_unit', stop_unit)
    monkeypatch.setattr(M.HostOps, 'unit_show', unit_show)
    monkeypatch.setattr(M.HostOps, 'unit_state', unit_state)
    monkeypatch.setattr(M.HostOps, 'disable_unit', disable_unit)
    return state


def own_socket(addr, port, listen=True):
    s = socket.socket(socket.AF_INET6 if ':' in addr else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    if listen:
        s.listen(4)
    return s


# ---------------------------------------------------------------- state=free

def test_free_fails_on_real_listener_naming_port_and_pid(run_module, free_group):
    ports = free_group(8)
    s = own_socket(HOST, ports[3])
    try:
        failed, res = run_module(M, args(ports))
    finally:
        s.close()
    assert failed
    assert str(ports[3]) in res['msg'] and 'pid %d' % os.getpid() in res['msg']
    assert 'pick another kv_port' in res['msg']
    assert [f['check'] for f in res['findings']] == ['PortBusy']
    assert res['busy'][0]['pid'] == os.getpid() and res['busy'][0]['endpoint'] == '%s:%d' % (HOST, ports[3])
    assert res['ports'] == ports and not res['changed']


def test_free_ignored_check_is_a_warning(run_module, free_group):
    """vllm_pd_ignore_checks: an ignored PortBusy warns and does not fail; other checks still do."""
    ports = free_group(8)
    s = own_socket(HOST, ports[3])
    try:
        failed, res = run_module(M, dict(args(ports), ignore_checks=['PortBusy'], _ansible_check_mode=True))
        failed_other, _res = run_module(M, dict(args(ports), ignore_checks=['AdxlWindow'], _ansible_check_mode=True))
    finally:
        s.close()
    assert not failed and res['findings'] == []
    assert any('ignored by vllm_pd_ignore_checks: [PortBusy]' in w for w in res['warnings'])
    assert failed_other


def test_free_wildcard_and_v6_wildcard_block(run_module, free_group, spawn_listener):
    ports = free_group(4)
    a = spawn_listener('0.0.0.0', ports[0])
    try:
        b = spawn_listener('::', ports[1])
    except RuntimeError:
        b = None
    failed, res = run_module(M, args(ports))
    assert failed
    busy = dict((h['port'], h) for h in res['busy'])
    assert busy[ports[0]]['pid'] == a.pid and busy[ports[0]]['address'] == '0.0.0.0'
    if b is not None:
        assert busy[ports[1]]['pid'] == b.pid and busy[ports[1]]['address'] == '::'
        assert str(b.pid) in res['msg']


def test_free_names_the_holder_from_proc_when_netlink_is_refused(run_module, free_group, monkeypatch):
    ports = free_group(4)
    failed, res = run_module(M, args(ports))
    assert not failed and res['socket_source'] in ('sock_diag', 'proc')

    def refused(ports=None):
        raise OSError(errno.EPERM, 'Operation not permitted')    # as under a seccomp profile
    monkeypatch.setattr(sock_diag, 'dump_tcp', refused)
    s = own_socket(HOST, ports[2])
    try:
        failed, res = run_module(M, args(ports))
    finally:
        s.close()
    assert failed and res['socket_source'] == 'proc'
    assert [(h['port'], h['pid']) for h in res['busy']] == [(ports[2], os.getpid())]


def test_free_other_address_is_only_a_warning(run_module, free_group, spawn_listener):
    ports = free_group(4)
    other = spawn_listener('127.0.0.1', ports[1])
    failed, res = run_module(M, args(ports))
    assert not failed and not res['changed'], res.get('msg')
    assert res['busy'] == [] and res['findings'] == []
    assert res['misleading'][0]['pid'] == other.pid
    assert any('127.0.0.1' in w and str(ports[1]) in w and 'mislead' in w for w in res['warnings'])


def test_free_stops_only_the_allowed_unit(run_module, free_group, spawn_listener, fake_units, fake_systemctl):
    ports = free_group(8)
    unrelated_port = free_group(1)[0]     # from the same reserved block: never one of ports
    assert unrelated_port not in ports
    grafana = spawn_listener('0.0.0.0', [ports[2], ports[5]])
    unrelated = spawn_listener('0.0.0.0', unrelated_port)
    fake_units[grafana.pid] = 'grafana-server.service'
    fake_units[unrelated.pid] = 'prometheus.service'
    fake_systemctl['children']['grafana-server.service'] = grafana
    fake_systemctl['children']['prometheus.service'] = unrelated
    failed, res = run_module(M, args(ports, stop_services=['grafana-server', 'prometheus.service']))
    assert not failed, res.get('msg')
    assert res['stopped'] == ['grafana-server.service'] and res['changed']
    assert fake_systemctl['calls'] == ['grafana-server.service']
    assert not grafana.alive() and unrelated.alive()
    assert sorted(h['port'] for h in res['busy']) == [ports[2], ports[5]]


def test_free_check_mode_reports_without_stopping(run_module, free_group, spawn_listener, fake_units, fake_systemctl):
    ports = free_group(8)
    grafana = spawn_listener(HOST, ports[0])
    fake_units[grafana.pid] = 'grafana-server.service'
    fake_systemctl['children']['grafana-server.service'] = grafana
    failed, res = run_module(M, dict(args(ports, stop_services=['grafana-server.service']),
                                     _ansible_check_mode=True, _ansible_diff=True))
    assert not failed and res['changed'] and res['stopped'] == ['grafana-server.service']
    assert fake_systemctl['calls'] == [] and grafana.alive()
    assert '%s:%d' % (HOST, ports[0]) in res['diff']['before']
    assert '%s:%d' % (HOST, ports[0]) not in res['diff']['after']


def test_free_unlisted_holder_is_an_error_and_nothing_stops(run_module, free_group, spawn_listener, fake_units,
                                                            fake_systemctl):
    ports = free_group(8)
    grafana = spawn_listener(HOST, ports[1])
    plain = spawn_listener(HOST, ports[4])
    allowed = spawn_listener(HOST, ports[6])
    fake_units[grafana.pid] = 'grafana-server.service'
    fake_units[allowed.pid] = 'node-exporter.service'
    fake_systemctl['children']['node-exporter.service'] = allowed
    failed, res = run_module(M, args(ports, stop_services=['node-exporter']))
    assert failed
    assert fake_systemctl['calls'] == [] and grafana.alive() and plain.alive() and allowed.alive()
    msg = res['msg']
    assert 'add grafana-server.service to vllm_pd_stop_services' in msg and 'pid %d' % grafana.pid in msg
    assert 'pid %d' % plain.pid in msg and 'never killed' in msg
    assert 'node-exporter' not in msg


def test_free_real_stop_path_uses_systemctl_argv_and_waits(run_module, monkeypatch, free_group, spawn_listener,
                                                           fake_units):
    """The honest path: run_command(['systemctl', 'stop', '--', unit]); the port stays busy -> timeout error."""
    ports = free_group(2)
    holder = spawn_listener(HOST, ports[0])
    fake_units[holder.pid] = 'grafana-server.service'
    calls = []

    def run_command(self, argv, **kw):
        calls.append(argv)
        return 0, '', ''
    monkeypatch.setattr(M.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(M.AnsibleModule, 'get_bin_path', lambda self, name, **kw: '/usr/bin/' + name)
    t0 = time.time()
    failed, res = run_module(M, args(ports, stop_services=['grafana-server.service'], timeout=1))
    assert failed and time.time() - t0 < 15  # the 1 s given, not the default 30 s (far from both: load-proof)
    # the state read before the stop (systemctl show, for the record of holders_off) changes nothing
    assert [c for c in calls if c[1] != 'show'] == [['/usr/bin/systemctl', 'stop', '--', 'grafana-server.service']]
    assert 'still busy' in res['msg'] and str(ports[0]) in res['msg'] and holder.alive()


def test_free_static_findings_listed_together(run_module, spawn_listener):
    failed, res = run_module(M, dict(kv_port=20002, tp_size=8, host_ip=HOST, npu_count=8,
                                     extra_reserved=['20005'], bind_probe=False))
    assert failed
    assert sorted(f['check'] for f in res['findings']) == ['AdxlWindow', 'ReservedPort']
    assert '20002-20009' in res['msg'] and '[AdxlWindow]' in res['msg'] and '[ReservedPort]' in res['msg']
    assert res['adxl_window'] == [20000, 27999]


def test_free_ascend_base_port_and_adxl_override(run_module, monkeypatch, free_group):
    ports = free_group(8)
    failed, res = run_module(M, args(ports, npu_count=1, ascend_base_port=ports[0] - 100))
    assert failed and [f['check'] for f in res['findings']] == ['AdxlWindow']
    failed, res = run_module(M, args(ports, npu_count=1, adxl_window=dict(enabled=False)))
    assert not failed and res['adxl_window'] == []
    failed, res = run_module(M, args(ports, adxl_window=dict(start=ports[7], end=ports[7] + 10)))
    assert failed and res['findings'][0]['ports'] == [ports[7]]


def test_free_ephemeral_range(run_module, monkeypatch, free_group):
    ports = free_group(8)
    monkeypatch.setattr(M.HostOps, 'sysctl_ranges', lambda self: ((ports[0] - 10, 60999), [(8080, 8080)]))
    written = []
    monkeypatch.setattr(M.HostOps, 'write_reserved', lambda self, v: written.append(v))
    line = 'net.ipv4.ip_local_reserved_ports = 8080,%d-%d' % (ports[0], ports[-1])
    failed, res = run_module(M, args(ports))
    assert failed and res['findings'][0]['check'] == 'EphemeralRange' and line in res['msg']
    failed, res = run_module(M, dict(args(ports, reserve_ephemeral=True), _ansible_check_mode=True))
    assert not failed and res['changed'] and written == []
    assert res['reserved_ports'] == '8080,%d-%d' % (ports[0], ports[-1])
    failed, res = run_module(M, args(ports, reserve_ephemeral=True))
    assert not failed and res['changed'] and written == ['8080,%d-%d' % (ports[0], ports[-1])]


def test_free_bound_not_listening_found_by_bind_probe(run_module, free_group):
    ports = free_group(4)
    s = own_socket(HOST, ports[2], listen=False)
    s2 = socket.socket()          # without SO_REUSEADDR, like most programs
    s2.bind((HOST, ports[3]))
    try:
        failed, res = run_module(M, args(ports))
        failed_np, _res = run_module(M, args(ports, bind_probe=False))
    finally:
        s.close()
        s2.close()
    assert failed and not failed_np
    assert sorted(h['port'] for h in res['busy']) == [ports[3]] or ports[3] in [h['port'] for h in res['busy']]
    assert 'EADDRINUSE' in res['msg']


def test_free_host_ip_not_local(run_module, free_group):
    failed, res = run_module(M, args(free_group(2), host_ip='192.0.2.77'))
    assert failed and res['findings'][0]['check'] == 'HostIp' and 'VLLM_HOST_IP' in res['msg']


def test_free_established_connection_blocks(run_module, free_group):
    ports = free_group(2)
    server_port = free_group(1)[0]    # checked free, outside the group
    srv = own_socket('127.0.0.1', server_port)
    cli = socket.socket()
    cli.bind((HOST, ports[1]))        # outbound connection whose local port is in the group
    cli.connect(('127.0.0.1', server_port))
    acc = srv.accept()[0]
    try:
        failed, res = run_module(M, args(ports))
    finally:
        for x in (acc, cli, srv):
            x.close()
    assert failed and res['busy'][0]['state'] == 'ESTABLISHED' and res['busy'][0]['pid'] == os.getpid()
    assert 'ip_local_reserved_ports' in res['msg']


def test_free_ports_of_the_owner_unit_are_held_by_owner_not_busy(run_module, free_group, spawn_listener, fake_units,
                                                                 fake_systemctl):
    """Re-deploy with a changed kv_port while the old prefill still runs: its ports are no failure."""
    ports = free_group(8)
    old_vllm = spawn_listener(HOST, [ports[0], ports[1]])     # the old group overlaps the new one
    fake_units[old_vllm.pid] = 'vllm-pd-prefill.service'
    failed, res = run_module(M, args(ports, owner_unit='vllm-pd-prefill'))
    assert not failed, res.get('msg')
    assert res['busy'] == [] and res['findings'] == [] and not res['changed'] and res['stopped'] == []
    assert sorted(h['port'] for h in res['held_by_owner']) == [ports[0], ports[1]]
    assert res['held_by_owner'][0]['pid'] == old_vllm.pid
    assert old_vllm.alive() and fake_systemctl['calls'] == []
    # without owner_unit the same sockets are a failure
    failed, res = run_module(M, args(ports))
    assert failed and res['held_by_owner'] == [] and 'pid %d' % old_vllm.pid in res['msg']


def test_free_owner_found_by_main_pid_and_foreign_holder_still_fails(run_module, free_group, spawn_listener,
                                                                     fake_units, fake_systemctl):
    ports = free_group(8)
    old_vllm = spawn_listener(HOST, ports[2])                 # no cgroup unit: found as the unit's MainPID
    grafana = spawn_listener('0.0.0.0', ports[5])
    fake_units[grafana.pid] = 'grafana-server.service'
    fake_systemctl['show']['vllm-pd-prefill.service'] = dict(LoadState='loaded', ActiveState='active',
                                                             SubState='running', MainPID=str(old_vllm.pid))
    failed, res = run_module(M, args(ports, owner_unit='vllm-pd-prefill.service'))
    assert failed
    assert [h['port'] for h in res['held_by_owner']] == [ports[2]]
    assert [h['port'] for h in res['busy']] == [ports[5]]
    assert 'pid %d' % grafana.pid in res['msg'] and 'pid %d' % old_vllm.pid not in res['msg']


def test_free_stop_waits_only_for_foreign_ports(run_module, free_group, spawn_listener, fake_units, fake_systemctl):
    """The owner's port stays held after grafana is stopped; the wait ends as soon as grafana's ports are free."""
    ports = free_group(4)
    old_vllm = spawn_listener(HOST, ports[0])
    grafana = spawn_listener(HOST, ports[3])
    fake_units[old_vllm.pid] = 'vllm-pd-prefill.service'
    fake_units[grafana.pid] = 'grafana-server.service'
    fake_systemctl['children']['grafana-server.service'] = grafana
    t0 = time.time()
    failed, res = run_module(M, args(ports, owner_unit='vllm-pd-prefill.service',
                                     stop_services=['grafana-server.service', 'vllm-pd-prefill.service'], timeout=60))
    assert not failed, res.get('msg')
    assert time.time() - t0 < 30  # not the 60 s timeout: the owner's port is not waited for
    assert res['stopped'] == ['grafana-server.service'] and res['changed']
    assert fake_systemctl['calls'] == ['grafana-server.service'] and old_vllm.alive()
    assert [h['port'] for h in res['held_by_owner']] == [ports[0]]


def test_free_holder_in_the_modules_own_container_gets_no_container_hint(tmp_path, monkeypatch):
    """Lab hosts are podman containers: a holder in the module's own container is a local process."""
    own = 'libpod-%s' % ('a' * 64)
    root = tmp_path / 'proc'
    for pid, cg in (('self', '/libpod_parent/%s/session-1.scope' % own),
                    ('700', '/libpod_parent/%s/system.slice/grafana-server.service' % own),
                    ('701', '/libpod_parent/libpod-%s/system.slice/grafana-server.service' % ('c' * 64))):
        (root / pid).mkdir(parents=True)
        (root / pid / 'cgroup').write_text('9:name=systemd:%s\n0::/\n' % cg)
    ops = M.HostOps(None, proc_root=str(root))
    ops.container_inspect = lambda engine, ref: None     # no podman here: the name stays unknown
    hs = build_holders([dict(port=28003, address='0.0.0.0', family='tcp', state='LISTEN', inode=9, remote_address='',
                             remote_port=0)], {9: [700]}, ops.process_info)
    assert hs[0]['container'] is None and hs[0]['unit'] == 'grafana-server.service'
    msg = plan_stops(hs, [])[1][0]['msg']
    assert 'container' not in msg and 'add grafana-server.service to vllm_pd_stop_services' in msg
    assert ops.process_info(701)['container'] == 'c' * 64


@pytest.mark.parametrize('bad, text', [
    (dict(host_ip='vllm-p1'), 'not an IP address'),
    (dict(tp_size=0), 'invalid parallel sizes'),
    (dict(te_rpc_range=[1]), 'te_rpc_range'),
    (dict(extra_reserved=['x-y']), 'extra_reserved'),
    (dict(state='listening', host_ip=None), 'host_ip'),
])
def test_argument_errors(run_module, bad, text):
    a = dict(kv_port=28002, tp_size=8, host_ip=HOST, npu_count=8)
    a.update(bad)
    a = dict((k, v) for k, v in a.items() if v is not None)
    failed, res = run_module(M, a)
    assert failed and text in res['msg']


# ----------------------------------------------------------- state=listening

def test_listening_ok_with_owner_pid(run_module, free_group, spawn_listener):
    ports = free_group(4)
    vllm = spawn_listener(HOST, ports)
    failed, res = run_module(M, args(ports, state='listening', owner_pid=vllm.pid, timeout=5))
    assert not failed, res.get('msg')
    assert sorted(h['port'] for h in res['listeners']) == ports
    assert all(h['pid'] == vllm.pid for h in res['listeners'])


def test_listening_waits_for_late_listener(run_module, free_group, spawn_listener):
    ports = free_group(2)
    started = []
    t = threading.Timer(1.0, lambda: started.append(spawn_listener(HOST, ports)))
    t.start()
    try:
        failed, res = run_module(M, args(ports, state='listening', timeout=15))
    finally:
        t.join()
    assert not failed, res.get('msg')
    assert res['listeners'][0]['pid'] == started[0].pid


def test_listening_grafana_trap_fails_fast(run_module, free_group, spawn_listener):
    ports = free_group(4)
    vllm = spawn_listener(HOST, ports[:3])
    grafana = spawn_listener('0.0.0.0', ports[3])
    t0 = time.time()
    failed, res = run_module(M, args(ports, state='listening', owner_pid=vllm.pid, timeout=60))
    assert failed and time.time() - t0 < 20  # at once, not after the 60 s timeout
    assert res['findings'][0]['check'] == 'ForeignOwner'
    assert 'pid %d' % grafana.pid in res['msg'] and str(ports[3]) in res['msg']


def test_listening_wrong_address(run_module, free_group, spawn_listener):
    ports = free_group(2)
    vllm = spawn_listener('127.0.0.1', ports)
    failed, res = run_module(M, args(ports, state='listening', owner_pid=vllm.pid, timeout=30))
    assert failed and res['findings'][0]['check'] == 'WrongAddress'
    assert '127.0.0.1:%d' % ports[0] in res['msg'] and 'expected %s' % HOST in res['msg']
    assert 'VLLM_HOST_IP=%s' % HOST in res['msg']


def test_listening_timeout_names_closed_ports(run_module, free_group, spawn_listener):
    ports = free_group(4)
    vllm = spawn_listener(HOST, ports[:2])
    failed, res = run_module(M, args(ports, state='listening', owner_pid=vllm.pid, timeout=1))
    assert failed and res['findings'][0]['check'] == 'PortClosed'
    assert res['findings'][0]['ports'] == ports[2:]
    assert '%d-%d' % (ports[2], ports[3]) in res['msg'] and '2 of 4 up' in res['msg']


def test_listening_unit_died_fails_fast(run_module, free_group, fake_systemctl):
    ports = free_group(2)
    fake_systemctl['show']['vllm-prefill.service'] = dict(LoadState='loaded', ActiveState='failed',
                                                          SubState='failed', MainPID='0', Result='exit-code')
    t0 = time.time()
    failed, res = run_module(M, args(ports, state='listening', owner_unit='vllm-prefill', timeout=60))
    assert failed and time.time() - t0 < 20  # at once, not after the 60 s timeout
    assert res['findings'][0]['check'] == 'UnitInactive'
    assert 'vllm-prefill.service is failed/failed (Result=exit-code)' in res['msg'] and 'journalctl' in res['msg']


def test_listening_owner_unit_via_main_pid(run_module, free_group, spawn_listener, fake_systemctl):
    ports = free_group(2)
    vllm = spawn_listener(HOST, ports)
    fake_systemctl['show']['vllm-prefill.service'] = dict(LoadState='loaded', ActiveState='active',
                                                          SubState='running', MainPID=str(vllm.pid))
    failed, res = run_module(M, args(ports, state='listening', owner_unit='vllm-prefill.service', timeout=5))
    assert not failed, res.get('msg')
    # the same listener, but the unit's MainPID is someone else -> foreign
    other = spawn_listener('127.0.0.3', free_group(1))
    fake_systemctl['show']['vllm-prefill.service']['MainPID'] = str(other.pid)
    failed, res = run_module(M, args(ports, state='listening', owner_unit='vllm-prefill.service', timeout=5))
    assert failed and res['findings'][0]['check'] == 'ForeignOwner'


def test_listening_owner_unit_via_cgroup(run_module, free_group, spawn_listener, fake_units, fake_systemctl):
    ports = free_group(2)
    vllm = spawn_listener(HOST, ports)
    fake_units[vllm.pid] = 'vllm-prefill.service'
    fake_systemctl['show']['vllm-prefill.service'] = dict(LoadState='loaded', ActiveState='active',
                                                          SubState='running', MainPID='0')
    failed, res = run_module(M, args(ports, state='listening', owner_unit='vllm-prefill.service', timeout=5))
    assert not failed, res.get('msg')


def test_listening_owner_pid_exits(run_module, free_group, spawn_listener, wait_until):
    ports = free_group(2)
    vllm = spawn_listener('127.0.0.3', free_group(1))
    vllm.stop()
    assert wait_until(lambda: not vllm.alive())
    failed, res = run_module(M, args(ports, state='listening', owner_pid=vllm.pid, timeout=30))
    assert failed and res['findings'][0]['check'] == 'UnitInactive'


# ----------------------------------------------------------- state=reachable

zmq = pytest.importorskip('zmq')


@pytest.fixture
def routers():
    ctx = zmq.Context()
    socks = []

    def _bind(ports, host='127.0.0.1'):
        for p in ports:
            s = ctx.socket(zmq.ROUTER)
            s.setsockopt(zmq.LINGER, 0)
            s.bind('tcp://%s:%d' % (host, p))
            socks.append(s)
    yield _bind
    for s in socks:
        s.close(0)
    ctx.term()


def http_server(port):
    import http.server
    srv = http.server.HTTPServer(('127.0.0.1', port), http.server.SimpleHTTPRequestHandler)
    t = threading.Thread(target=srv.serve_forever)
    t.daemon = True
    t.start()
    return srv


def test_reachable_ok(run_module, free_group, routers):
    ports = free_group(8)
    routers(ports)
    t0 = time.time()
    failed, res = run_module(M, dict(kv_port=ports[0], tp_size=8, remote_host='127.0.0.1', state='reachable',
                                     probe_timeout=10))
    assert not failed, res.get('msg')
    assert [p['result'] for p in res['probes']] == ['zmq'] * 8 and not res['changed']
    assert time.time() - t0 < 5  # a router's greeting ends its probe: no probe waits for its 10 s timeout


def test_reachable_names_http_and_refused(run_module, free_group, routers):
    ports = free_group(8)
    routers(ports[:6])
    srv = http_server(ports[6])
    try:
        t0 = time.time()
        failed, res = run_module(M, dict(kv_port=ports[0], tp_size=8, host_ip='127.0.0.1', state='reachable',
                                         probe_timeout=0.5))
        took = time.time() - t0
    finally:
        srv.shutdown()
        srv.server_close()
    assert failed and took < 10  # named at once: reachable does not retry (its timeout is 0)
    by = dict((p['port'], p['result']) for p in res['probes'])
    assert by[ports[6]] == 'http' and by[ports[7]] == 'refused'
    assert res['findings'][0]['ports'] == ports[6:]
    assert '127.0.0.1:%d http' % ports[6] in res['msg'] and '127.0.0.1:%d refused' % ports[7] in res['msg']


def test_reachable_needs_a_host(run_module):
    failed, res = run_module(M, dict(kv_port=28002, state='reachable'))
    assert failed and 'remote_host' in res['msg']


# ------------------------------------------------------------ containers

CID = 'c' * 64


@pytest.fixture
def fake_containers(monkeypatch):
    """Processes that play container processes, and a fake podman/docker (inspect, stop)."""
    state = dict(members={}, known={}, stops=[], children={}, policy={}, updates=[])
    orig = M.HostOps.process_info

    def process_info(self, pid):
        info = dict(orig(self, pid))
        if pid in state['members']:
            runtime, cid, name = state['members'][pid]
            info.update(container=cid, container_runtime=runtime, container_name=name,
                        unit='libpod-%s.scope' % cid)
        return info

    def container_inspect(self, engine, ref):
        return state['known'].get((engine, ref))

    def stop_container(self, engine, name):
        state['stops'].append((engine, name))
        state['children'][name].stop()
        return 0, ''

    def container_restart_policy(self, engine, name):
        return state['policy'].get(name, 'no')

    def set_container_restart(self, engine, name, policy):
        state['updates'].append((engine, name, policy))
        return 0, ''
    monkeypatch.setattr(M.HostOps, 'process_info', process_info)
    monkeypatch.setattr(M.HostOps, 'container_inspect', container_inspect)
    monkeypatch.setattr(M.HostOps, 'stop_container', stop_container)
    monkeypatch.setattr(M.HostOps, 'container_restart_policy', container_restart_policy)
    monkeypatch.setattr(M.HostOps, 'set_container_restart', set_container_restart)
    return state


def test_free_stops_an_allowed_container_with_its_engine(run_module, free_group, spawn_listener, fake_containers,
                                                         fake_systemctl):
    ports = free_group(4)
    old = spawn_listener(HOST, ports[1])
    fake_containers['members'][old.pid] = ('docker', CID, 'old-grafana')
    fake_containers['children']['old-grafana'] = old
    a = args(ports, stop_services=['container:old-grafana'], timeout=10)
    failed, res = run_module(M, dict(a, _ansible_check_mode=True, _ansible_diff=True))
    assert not failed and res['changed'] and res['stopped'] == ['container:old-grafana']
    assert res['stopped_containers'] == [dict(name='old-grafana', engine='docker')]
    assert fake_containers['stops'] == [] and old.alive()
    assert 'container=old-grafana' in res['diff']['before'] and str(ports[1]) not in res['diff']['after']
    failed, res = run_module(M, a)
    assert not failed, res.get('msg')
    assert fake_containers['stops'] == [('docker', 'old-grafana')] and not old.alive()
    assert fake_systemctl['calls'] == []


def test_free_container_not_allowed_is_an_error_naming_it(run_module, free_group, spawn_listener, fake_containers,
                                                          fake_systemctl):
    ports = free_group(4)
    old = spawn_listener(HOST, ports[2])
    fake_containers['members'][old.pid] = ('podman', CID, 'old-grafana')
    fake_containers['children']['old-grafana'] = old
    failed, res = run_module(M, args(ports, stop_services=['container:something-else', 'grafana-server']))
    assert failed and old.alive() and fake_containers['stops'] == []
    assert 'container old-grafana is not allowed' in res['msg'] and 'container:old-grafana' in res['msg']
    assert res['busy'][0]['container_runtime'] == 'podman' and res['busy'][0]['container_name'] == 'old-grafana'


def test_free_bad_container_entry_fails_before_anything(run_module, free_group):
    failed, res = run_module(M, args(free_group(2), stop_services=['container:a b']))
    assert failed and "'container:a b'" in res['msg'] and 'vllm_pd_stop_services' in res['msg']


def test_free_owner_container_holds_its_ports(run_module, free_group, spawn_listener, fake_containers,
                                              fake_systemctl):
    """A running containerised prefill (not in the unit's cgroup) re-deployed: its ports are the owner's."""
    ports = free_group(4)
    vllm = spawn_listener(HOST, ports[:2])
    intruder = spawn_listener(HOST, ports[3])
    fake_containers['members'][vllm.pid] = ('podman', CID, 'vllm-pd-prefill')
    fake_containers['members'][intruder.pid] = ('podman', 'd' * 64, 'intruder')
    fake_containers['known'][('podman', 'vllm-pd-prefill')] = dict(id=CID, pid=None, name='vllm-pd-prefill')
    failed, res = run_module(M, args(ports, owner_unit='vllm-pd-prefill.service', owner_container='vllm-pd-prefill'))
    assert failed
    assert [h['port'] for h in res['held_by_owner']] == ports[:2]
    assert [h['port'] for h in res['busy']] == [ports[3]] and 'container intruder' in res['msg']


def test_listening_owner_container_by_cgroup_or_init_pid(run_module, free_group, spawn_listener, fake_containers,
                                                         fake_systemctl):
    ports = free_group(2)
    vllm = spawn_listener(HOST, ports)
    podman_client = spawn_listener('127.0.0.3', free_group(1))    # the unit's MainPID: "podman run"
    fake_systemctl['show']['vllm-pd-prefill.service'] = dict(
        LoadState='loaded', ActiveState='active', SubState='running', MainPID=str(podman_client.pid))
    a = args(ports, state='listening', owner_unit='vllm-pd-prefill.service', owner_container='vllm-pd-prefill',
             container_engine='docker', timeout=3)
    # not in the unit's cgroup, not below MainPID, no such container: foreign (the strict check)
    failed, res = run_module(M, a)
    assert failed and res['findings'][0]['check'] == 'ForeignOwner'
    assert 'vllm-pd-prefill.service / container vllm-pd-prefill' in res['msg']
    # found through the container's init pid (docker's cgroup path not visible)
    fake_containers['known'][('docker', 'vllm-pd-prefill')] = dict(id=CID, pid=vllm.pid, name='vllm-pd-prefill')
    failed, res = run_module(M, a)
    assert not failed, res.get('msg')
    # found through the cgroup's container id; podman's container of that name is not asked for
    fake_containers['known'][('docker', 'vllm-pd-prefill')] = dict(id=CID, pid=None, name='vllm-pd-prefill')
    fake_containers['members'][vllm.pid] = ('docker', CID, 'vllm-pd-prefill')
    fake_containers['known'][('podman', 'vllm-pd-prefill')] = dict(id='d' * 64, pid=None, name='x')
    failed, res = run_module(M, a)
    assert not failed, res.get('msg')
    # another container of the same process tree shape is foreign
    fake_containers['members'][vllm.pid] = ('docker', 'd' * 64, 'other')
    failed, res = run_module(M, a)
    assert failed and 'container other' in res['msg']


def test_container_engine_argv(monkeypatch):
    """podman/docker are called with argv lists: inspect by name, stop by name."""
    calls = []

    def run_command(self, argv, **kw):
        calls.append(argv)
        return (0, '%s 42 /vllm-pd-prefill\n' % CID, '') if argv[1] == 'container' else (0, '', '')
    monkeypatch.setattr(M.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(M.AnsibleModule, 'get_bin_path', lambda self, name, **kw: '/usr/bin/' + name)
    ops = M.HostOps(module=M.AnsibleModule.__new__(M.AnsibleModule))
    assert ops.container_inspect('docker', 'vllm-pd-prefill') == dict(id=CID, pid=42, name='vllm-pd-prefill')
    assert ops.stop_container('podman', 'old-grafana') == (0, '')
    assert ops.container_name('podman', CID) == 'vllm-pd-prefill'
    assert ops.container_name('podman', CID) == 'vllm-pd-prefill'   # cached: one more inspect only
    assert calls == [
        ['/usr/bin/docker', 'container', 'inspect', '--format', '{{.Id}} {{.State.Pid}} {{.Name}}', 'vllm-pd-prefill'],
        ['/usr/bin/podman', 'stop', 'old-grafana'],
        ['/usr/bin/podman', 'container', 'inspect', '--format', '{{.Id}} {{.State.Pid}} {{.Name}}', CID]]
    monkeypatch.setattr(M.AnsibleModule, 'get_bin_path', lambda self, name, **kw: None)
    assert ops.container_inspect('docker', 'x') is None and ops.stop_container('docker', 'x')[0] == 127
