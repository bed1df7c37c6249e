# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The start guard against real sockets on 127.0.0.2 (children of the test) and the real /proc."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import io
import json
import os
import re
import socket
import subprocess
import sys

import pytest

from ansible_collections.vllm_pd.ascend.plugins.lookup.pd_module_utils_tree import LookupModule
from ansible_collections.vllm_pd.ascend.plugins.module_utils.guard import start_guard as G
from ansible_collections.vllm_pd.ascend.plugins.module_utils.guard.guard_files import PREFIX, guard_tree as guard_tree_of
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import parse_port_list

HOST = '127.0.0.2'
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *['..'] * 5))
SCRIPT = os.path.join(REPO_ROOT, 'roles', 'engine', 'files', 'start-guard')


def cfg_for(ports, **kw):
    data = dict(unit='vllm-pd-prefill.service', host_ip=HOST, address_wait=0, npu_count=8,
                group=dict(kv_port=ports[0], tp_size=len(ports) - 1), ports=[dict(port=ports[-1], what='API')])
    data.update(kw)
    return G.parse_config(data)


class View(G.GuardOps):
    """The real host reads (sockets, /proc), with units, systemctl and the sysctl under the test's control."""

    def __init__(self, units=None, ephemeral=(60000, 60999), reserved=()):
        G.GuardOps.__init__(self)
        self.units, self.ranges, self.written = units or {}, (ephemeral, list(reserved)), []

    def process_info(self, pid):
        info = dict(G.GuardOps.process_info(self, pid))
        if pid in self.units:
            info['unit'] = self.units[pid]
        return info

    def unit_show(self, unit):
        return dict(LoadState='loaded', ActiveState='activating', MainPID='0')

    def sysctl_ranges(self):
        return self.ranges

    def write_reserved(self, value):
        self.written.append(value)
        self.ranges = (self.ranges[0], parse_port_list(value))


def guard(cfg, view, env=None):
    lines = []
    rc = G.run(cfg, env or {}, view, lines.append)
    return rc, lines


def test_free_group_and_api_port_start(free_group):
    ports = free_group(5)
    assert guard(cfg_for(ports), View()) == (0, [])


def test_a_foreign_listener_is_refused_in_one_line_naming_port_pid_unit_and_fix(free_group, spawn_listener):
    ports = free_group(5)
    lis = spawn_listener('0.0.0.0', [ports[2]])
    rc, lines = guard(cfg_for(ports), View(units={lis.pid: 'grafana-server.service'}))
    assert rc == G.EXIT_REFUSED and len(lines) == 1 and '\n' not in lines[0]
    line = lines[0]
    assert 'refused to start vllm-pd-prefill.service' in line
    assert 'port %d (kv_port group) on %s' % (ports[2], HOST) in line
    assert 'pid %d' % lis.pid in line and 'unit grafana-server.service' in line
    assert 'fix: systemctl disable --now grafana-server.service' in line and 'nothing was stopped' in line
    assert lis.alive()  # the guard kills nothing


def test_a_plain_process_on_the_api_port_gets_a_kill_it_yourself_fix(free_group, spawn_listener):
    ports = free_group(5)
    lis = spawn_listener(HOST, [ports[-1]])
    view = View(units={lis.pid: 'session-3.scope'})
    rc, lines = guard(cfg_for(ports), view)
    assert rc == G.EXIT_REFUSED
    assert 'port %d (API)' % ports[-1] in lines[0] and 'stop pid %d yourself' % lis.pid in lines[0]
    assert lis.alive()


def test_the_units_own_sockets_do_not_block_its_start(free_group, spawn_listener):
    ports = free_group(5)
    lis = spawn_listener(HOST, ports[:4])
    assert guard(cfg_for(ports), View(units={lis.pid: 'vllm-pd-prefill.service'})) == (0, [])


def test_a_listener_on_another_address_does_not_block(free_group, spawn_listener):
    ports = free_group(5)
    spawn_listener('127.0.0.3', ports[:2])
    assert guard(cfg_for(ports), View()) == (0, [])


def test_a_bound_but_not_listening_socket_is_found_by_the_bind_probe(free_group):
    ports = free_group(5)
    s = socket.socket()
    s.bind((HOST, ports[1]))
    try:
        rc, lines = guard(cfg_for(ports), View())
    finally:
        s.close()
    assert rc == G.EXIT_REFUSED and 'bound but not listening' in lines[0] and str(ports[1]) in lines[0]


class TableReadBeforeTheListen(View):
    """The first socket-table read comes before the unit's engine listens; the bind probe after it."""

    def __init__(self, **kw):
        View.__init__(self, **kw)
        self.reads = 0

    def sockets(self, ports):
        self.reads += 1
        return [] if self.reads == 1 else View.sockets(self, ports)


def test_a_port_that_began_to_listen_after_the_table_read_is_named_with_its_owner(free_group, spawn_listener):
    ports = free_group(5)
    lis = spawn_listener(HOST, [ports[1]])
    assert guard(cfg_for(ports), TableReadBeforeTheListen(units={lis.pid: 'vllm-pd-prefill.service'})) == (0, [])
    rc, lines = guard(cfg_for(ports), TableReadBeforeTheListen(units={lis.pid: 'grafana-server.service'}))
    assert rc == G.EXIT_REFUSED and 'pid %d' % lis.pid in lines[0] and 'bound but not listening' not in lines[0]


def test_vllm_host_ip_from_the_environment_file_wins(free_group, spawn_listener):
    ports = free_group(5)
    lis = spawn_listener('127.0.0.4', [ports[0]])
    rc, lines = guard(cfg_for(ports), View(), env={'VLLM_HOST_IP': '127.0.0.4'})
    assert rc == G.EXIT_REFUSED and 'on 127.0.0.4 held by pid %d' % lis.pid in lines[0]


@pytest.mark.parametrize('env, check', [
    ({'MC_MIN_RPC_PORT': 'LO', 'MC_MAX_RPC_PORT': 'HI'}, 'TeRpcRange'),
    ({'HCCL_IF_BASE_PORT': 'LO'}, 'HcclRange'),
    ({'ASCEND_BASE_PORT': 'LO'}, 'AdxlWindow'),
])
def test_the_windows_come_from_the_engine_environment(free_group, env, check):
    ports = free_group(5)
    assert guard(cfg_for(ports), View()) == (0, [])
    env = dict((k, str(ports[0] - 5 if v == 'LO' else ports[-1])) for k, v in env.items())
    rc, lines = guard(cfg_for(ports), View(), env=env)
    assert rc == G.EXIT_REFUSED and '[%s]' % check in lines[0]


def test_a_window_variable_that_is_not_a_port_is_a_configuration_error(free_group):
    rc, lines = guard(cfg_for(free_group(5)), View(), env={'HCCL_IF_BASE_PORT': 'x'})
    assert rc == G.EXIT_CONFIG and 'HCCL_IF_BASE_PORT=x' in lines[0]


def test_the_group_of_a_second_pipeline_stage_is_checked(free_group, spawn_listener):
    ports = free_group(9)
    lis = spawn_listener(HOST, [ports[6]])  # tp 2, pp 2, DP rank 1: ports[4..7]; stage 1 of rank 1 is 6-7
    cfg = cfg_for(ports, group=dict(kv_port=ports[0], tp_size=2, pp_size=2, dp_rank_start=1, dp_size_local=1))
    rc, lines = guard(cfg, View())
    assert rc == G.EXIT_REFUSED and 'port %d (kv_port group)' % ports[6] in lines[0] and str(lis.pid) in lines[0]


def test_an_address_that_is_not_on_the_host_is_refused_after_the_wait():
    # bind() to a TEST-NET address fails locally with EADDRNOTAVAIL; no packet is sent
    cfg = cfg_for([29000, 29001], host_ip='192.0.2.77')
    rc, lines = guard(cfg, View())
    assert rc == G.EXIT_REFUSED
    assert 'VLLM_HOST_IP 192.0.2.77 is not an address of this host after waiting 0 s' in lines[0]
    assert 'fix: bring up the data NIC' in lines[0]


def test_wait_for_address_polls_until_the_address_appears():
    clock = [0.0]
    answers = ['not yet', 'not yet', None]

    def check(_ip):
        return answers.pop(0)

    def sleep(s):
        clock[0] += s
    err, waited = G.wait_for_address('10.0.0.5', 60, check=check, sleep=sleep, now=lambda: clock[0])
    assert err is None and waited == pytest.approx(2 * G.POLL)


def test_wait_for_address_gives_up_at_the_bound():
    clock = [0.0]

    def sleep(s):
        clock[0] += s
    err, waited = G.wait_for_address('10.0.0.5', 3, check=lambda ip: 'gone', sleep=sleep, now=lambda: clock[0])
    assert err == 'gone' and waited == pytest.approx(3)


def test_a_boot_wait_is_logged_once_and_the_start_goes_on(free_group):
    ports = free_group(5)
    lines = []
    rc = G.run(cfg_for(ports), {}, View(), lines.append, wait=lambda ip, w: (None, 4.2))
    assert rc == 0 and len(lines) == 1 and 'waited 4.2 s for VLLM_HOST_IP 127.0.0.2' in lines[0]


def test_group_in_the_ephemeral_range_is_refused_or_reserved_again(free_group):
    ports = free_group(5)
    view = View(ephemeral=(ports[0], 60999))
    rc, lines = guard(cfg_for(ports), view)
    assert rc == G.EXIT_REFUSED and 'ephemeral range' in lines[0] and 'net.ipv4.ip_local_reserved_ports' in lines[0]
    view = View(ephemeral=(ports[0], 60999), reserved=[(100, 200)])
    rc, lines = guard(cfg_for(ports, reserve_ephemeral=True), view)
    assert rc == 0 and view.written == ['100-200,%d-%d' % (ports[0], ports[3])]


@pytest.mark.parametrize('data,text', [
    ([], 'not a JSON object'),
    (dict(), '"unit"'),
    (dict(unit='u', address_wait='x'), 'address_wait'),
    (dict(unit='u', address_wait=-1), 'address_wait'),
    (dict(unit='u', group=dict(tp_size=2)), '"group"'),
    (dict(unit='u', group=dict(kv_port=65535, tp_size=2)), 'outside 1-65535'),
    (dict(unit='u', ports=[dict(what='API')]), '"ports"'),
    (dict(unit='u', ports=[dict(port=0)]), 'outside 1-65535'),
])
def test_bad_configurations_are_named(data, text):
    with pytest.raises(G.ConfigError, match=re.escape(text)):
        G.parse_config(data)


def test_main_reports_an_unreadable_configuration_in_one_line(tmp_path):
    bad = tmp_path / 'x.guard.json'
    bad.write_text('{not json')
    out = io.StringIO()
    assert G.main([str(bad)], env={}, stream=out) == G.EXIT_CONFIG
    assert out.getvalue().count('\n') == 1 and 'run deploy_pd.yml again' in out.getvalue()


def guard_tree(root):
    """The tree file_set's start_guard_root writes on a host (guard_files.guard_tree): its directories, then its
    files; the files of lookup pd_module_utils_tree for guard.start_guard among them, byte for byte."""
    dirs, files = guard_tree_of(str(root))
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    for f in files:
        with open(f['path'], 'w', encoding='utf-8') as out:
            out.write(f['content'])
    lib = os.path.join(str(root), *PREFIX.split('.'))
    assert [f for f in files if f['path'].startswith(lib + '/') and f['content']] == [
        dict(path=os.path.join(lib, item['path']), content=item['content'])
        for item in LookupModule().run(['guard.start_guard']) if item['content']]
    return str(root)


def test_the_script_runs_from_the_tree_the_role_copies(tmp_path, free_group, spawn_listener):
    """As on a host: the system python, isolated (-I: no PYTHONPATH, no user site), with only the copied tree
    (first on the path, where the runner puts LIB); a file the guard imports and the tree lacks fails
    every start with an ImportError traceback instead of this one line."""
    tree = guard_tree(tmp_path / 'lib')
    ports = free_group(5)
    lis = spawn_listener(HOST, [ports[0]])
    path = tmp_path / 'prefill.guard.json'
    path.write_text(json.dumps(dict(unit='vllm-pd-prefill.service', host_ip=HOST, address_wait=0, npu_count=8,
                                    group=dict(kv_port=ports[0], tp_size=4))))
    run_guard = ('import sys; sys.path.insert(0, %r); sys.argv[1:] = [%r]; '
                 'exec(compile(open(%r).read(), "start-guard", "exec"))' % (tree, str(path), SCRIPT))
    argv = ['/usr/bin/python3', '-I', '-c', run_guard]
    r = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert r.returncode == 1, r.stderr
    assert r.stdout == '' and r.stderr.count('\n') == 1 and 'pid %d' % lis.pid in r.stderr
    lis.stop()
    r = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert (r.returncode, r.stderr) == (0, '')


_ACCEPT_ONE = r'''
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
sys.stdout.write('ready\n')
sys.stdout.flush()
c, _ = s.accept()
sys.stdout.write('accepted\n')
sys.stdout.flush()
time.sleep(300)
'''


def test_orphaned_connections_of_a_killed_engine_do_not_block_its_restart(free_group):
    """kill -9 of an engine leaves its accepted connections in FIN_WAIT without an owner while the peer
    (the proxy) keeps its side open; vLLM's SO_REUSEADDR bind goes through, so the guard lets it start."""
    ports = free_group(5)
    api = ports[-1]
    child = subprocess.Popen([sys.executable, '-c', _ACCEPT_ONE, HOST, str(api)], stdout=subprocess.PIPE)
    assert child.stdout.readline().strip() == b'ready'
    peer = socket.create_connection((HOST, api))
    try:
        assert child.stdout.readline().strip() == b'accepted'
        child.kill()
        child.wait(10)
        # the kernel now holds HOST:api in FIN_WAIT2 with no process (the peer did not close)
        view = View()
        orphans = [s for s in view.sockets([api]) if s['port'] == api and s['address'] == HOST]
        assert orphans and all(s['state'] != 'LISTEN' for s in orphans), orphans
        assert guard(cfg_for(ports), view) == (0, [])
    finally:
        peer.close()
        child.stdout.close()


def test_an_outbound_connection_from_a_group_port_still_blocks(free_group, spawn_listener):
    ports = free_group(5)
    srv = spawn_listener('127.0.0.3', [ports[0]])
    c = socket.socket()
    c.bind((HOST, ports[1]))  # no SO_REUSEADDR: as an ephemeral outbound connection
    c.connect(('127.0.0.3', ports[0]))
    try:
        rc, lines = guard(cfg_for(ports), View())
    finally:
        c.close()
    assert rc == G.EXIT_REFUSED and 'port %d (kv_port group)' % ports[1] in lines[0], lines
    assert 'ESTABLISHED' in lines[0] or 'pid %d' % os.getpid() in lines[0], lines
    assert srv.alive()
