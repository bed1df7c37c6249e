# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import socket

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import owners as O

V2 = '0::/system.slice/grafana-server.service\n'
V1 = ('12:pids:/system.slice/grafana-server.service\n'
      '1:name=systemd:/system.slice/grafana-server.service\n'
      '0::/\n')
HYBRID = ('9:name=systemd:/system.slice/vllm-prefill.service\n'
          '0::/system.slice/vllm-prefill.service\n')
PODMAN_HOST = '0::/machine.slice/libpod-%s.scope/container/system.slice/vllm-prefill.service\n' % ('a' * 64)
DOCKER = '0::/system.slice/docker-%s.scope\n' % ('b' * 64)
DOCKER_V1 = '4:memory:/docker/%s\n1:name=systemd:/docker/%s\n' % ('c' * 64, 'c' * 64)
SESSION = '0::/user.slice/user-0.slice/session-3.scope\n'


@pytest.mark.parametrize('text, path, unit', [
    (V2, '/system.slice/grafana-server.service', 'grafana-server.service'),
    (V1, '/system.slice/grafana-server.service', 'grafana-server.service'),
    (HYBRID, '/system.slice/vllm-prefill.service', 'vllm-prefill.service'),
    (PODMAN_HOST, '/machine.slice/libpod-%s.scope/container/system.slice/vllm-prefill.service' % ('a' * 64),
     'vllm-prefill.service'),
    (DOCKER, '/system.slice/docker-%s.scope' % ('b' * 64), 'docker-%s.scope' % ('b' * 64)),
    (SESSION, '/user.slice/user-0.slice/session-3.scope', 'session-3.scope'),
    ('0::/\n', '/', None),
    ('', None, None),
    ('0::/system.slice/foo.service/payload\n', '/system.slice/foo.service/payload', 'foo.service'),
])
def test_parse_cgroup_and_unit(text, path, unit):
    assert O.parse_cgroup(text) == path
    assert O.unit_from_cgroup_path(path) == unit


@pytest.mark.parametrize('path, runtime, cid', [
    ('/machine.slice/libpod-%s.scope/container' % ('a' * 64), 'podman', 'a' * 64),
    ('/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-%s.scope' % ('d' * 64), 'podman', 'd' * 64),
    ('/system.slice/docker-%s.scope' % ('b' * 64), 'docker', 'b' * 64),
    ('/docker/%s' % ('c' * 64), 'docker', 'c' * 64),
    ('/kubepods/besteffort/pod1234/%s' % ('e' * 64), 'kubernetes', 'e' * 64),
    ('/system.slice/crio-%s.scope' % ('f' * 64), 'cri-o', 'f' * 64),
    ('/machine.slice/libpod-conmon-%s.scope' % ('a' * 64), None, None),
    ('/system.slice/grafana-server.service', None, None),
])
def test_container_from_cgroup(path, runtime, cid):
    c = O.container_from_cgroup_path(path)
    if runtime is None:
        assert c is None
    else:
        assert c == dict(runtime=runtime, id=cid)


def test_parse_stat_ppid_with_odd_comm():
    assert O.parse_stat_ppid('123 (my (odd) proc) S 45 123 123 0 -1') == 45
    assert O.parse_stat_ppid('') is None


def test_parse_systemctl_show():
    out = 'LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=812\nResult=success\n'
    assert O.parse_systemctl_show(out) == dict(LoadState='loaded', ActiveState='active', SubState='running',
                                               MainPID='812', Result='success')


def make_proc(root, pid, ppid=1, comm='proc', cmdline=('proc',), cgroup='0::/\n', sockets=(), state='S'):
    d = root / str(pid)
    (d / 'fd').mkdir(parents=True)
    (d / 'comm').write_text(comm + '\n')
    (d / 'cmdline').write_bytes(b'\0'.join(a.encode() for a in cmdline) + b'\0')
    (d / 'cgroup').write_text(cgroup)
    (d / 'stat').write_text('%s (%s) %s %d %s %s 0 -1\n' % (pid, comm, state, ppid, pid, pid))
    for i, inode in enumerate(sockets):
        os.symlink('socket:[%d]' % inode, str(d / 'fd' / str(i + 3)))
    os.symlink('/dev/null', str(d / 'fd' / '0'))
    return d


@pytest.fixture
def fake_proc(tmp_path):
    root = tmp_path / 'proc'
    root.mkdir()
    make_proc(root, 1, ppid=0, comm='systemd', cmdline=('/sbin/init',), cgroup='0::/init.scope\n')
    make_proc(root, 812, comm='grafana', cmdline=('/usr/share/grafana/bin/grafana', 'server'), cgroup=V2,
              sockets=(5001, 5002))
    make_proc(root, 900, comm='vllm', cmdline=('vllm', 'serve', 'm'),
              cgroup='0::/system.slice/vllm-prefill.service\n', sockets=(6000,))
    make_proc(root, 901, ppid=900, comm='VLLM::Worker', cgroup='0::/system.slice/vllm-prefill.service\n',
              sockets=(6001, 6002))
    make_proc(root, 902, ppid=901, comm='python3', cgroup=DOCKER, sockets=(6002,))
    (root / 'self').mkdir()     # non-numeric entries are skipped
    return str(root)


def test_socket_owners_fixture(fake_proc):
    assert O.socket_owners(fake_proc) == {5001: [812], 5002: [812], 6000: [900], 6001: [901], 6002: [901, 902]}
    assert O.socket_owners(fake_proc, inodes=[6002, 7]) == {6002: [901, 902]}
    assert O.socket_owners(fake_proc, inodes=[0]) == {}


def test_a_process_that_exits_while_its_fds_are_listed_is_skipped(fake_proc, monkeypatch):
    """/proc/PID/fd opened, then the process exits: the listing fails with ENOENT (seen in a unit run that
    scanned the real /proc); the scan goes on with the other processes."""
    gone = os.path.join(fake_proc, '812', 'fd')
    real_listdir = os.listdir

    def listdir(path):
        if isinstance(path, int) and os.path.samestat(os.fstat(path), os.stat(gone)):
            raise FileNotFoundError(2, 'No such file or directory')
        return real_listdir(path)

    monkeypatch.setattr(O.os, 'listdir', listdir)
    assert O.socket_owners(fake_proc) == {6000: [900], 6001: [901], 6002: [901, 902]}


def test_process_info_fixture(fake_proc):
    info = O.process_info(812, fake_proc)
    assert info['name'] == 'grafana' and info['unit'] == 'grafana-server.service'
    assert info['cmdline'] == '/usr/share/grafana/bin/grafana server'
    assert info['ppid'] == 1 and info['container'] is None
    d = O.process_info(902, fake_proc)
    assert d['container'] == 'b' * 64 and d['container_runtime'] == 'docker'
    gone = O.process_info(4242, fake_proc)
    assert gone['name'] is None and gone['unit'] is None


def test_descendants_fixture(fake_proc):
    assert O.ancestors(902, fake_proc) == [902, 901, 900, 1]
    assert O.is_descendant(902, 900, fake_proc)
    assert O.is_descendant(900, 900, fake_proc)
    assert not O.is_descendant(812, 900, fake_proc)
    assert not O.is_descendant(812, None, fake_proc)


def test_pid_alive_fixture(fake_proc, tmp_path):
    make_proc(tmp_path / 'proc', 999, state='Z')
    assert O.pid_alive(812, fake_proc)
    assert not O.pid_alive(999, fake_proc)
    assert not O.pid_alive(4242, fake_proc)


def test_resolve_docker_name(tmp_path):
    d = tmp_path / 'var/lib/docker/containers' / ('b' * 64)
    d.mkdir(parents=True)
    (d / 'config.v2.json').write_text('{"Name": "/grafana"}')
    assert O.resolve_container_name(dict(runtime='docker', id='b' * 64), str(tmp_path)) == 'grafana'
    assert O.resolve_container_name(dict(runtime='podman', id='x'), str(tmp_path)) is None


def test_real_socket_owner_is_this_process():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    s.listen(1)
    try:
        inode = os.fstat(s.fileno()).st_ino
        assert os.getpid() in O.socket_owners(inodes=[inode])[inode]
        me = O.process_info(os.getpid())
        assert me['cmdline'] and me['ppid'] == os.getppid()
    finally:
        s.close()


LAB_A = '/libpod_parent/libpod-%s' % ('a' * 64)   # podman with cgroupfs on cgroup v1 (the lab hosts)


def test_containers_in_cgroup_path_nested_and_deduplicated():
    path = LAB_A + '/system.slice/docker-%s.scope' % ('b' * 64)
    assert O.containers_in_cgroup_path(path) == [dict(runtime='podman', id='a' * 64),
                                                 dict(runtime='docker', id='b' * 64)]
    assert O.containers_in_cgroup_path('/system.slice/grafana-server.service') == []


def test_container_hint_only_for_a_container_other_than_the_modules_own():
    own = [dict(runtime='podman', id='a' * 64)]
    same = LAB_A + '/system.slice/vllm-pd-prefill.service'
    nested = LAB_A + '/system.slice/docker-%s.scope' % ('b' * 64)
    other = '/libpod_parent/libpod-%s/system.slice/grafana-server.service' % ('c' * 64)
    assert O.container_from_cgroup_path(same, own) is None
    assert O.container_from_cgroup_path(nested, own) == dict(runtime='docker', id='b' * 64)
    assert O.container_from_cgroup_path(other, own) == dict(runtime='podman', id='c' * 64)
    # run on the host itself (own is empty), every container is named
    assert O.container_from_cgroup_path(same) == dict(runtime='podman', id='a' * 64)


def test_process_info_in_the_modules_own_container(tmp_path):
    """The module runs in lab host A (a podman container with systemd); holders in A are local."""
    root = tmp_path / 'proc'
    root.mkdir()
    make_proc(root, 'self', cgroup='9:name=systemd:%s/session-1.scope\n0::/\n' % LAB_A)
    make_proc(root, 700, comm='vllm', cgroup='9:name=systemd:%s/system.slice/vllm-pd-prefill.service\n' % LAB_A)
    make_proc(root, 701, comm='grafana',
              cgroup='9:name=systemd:/libpod_parent/libpod-%s/system.slice/grafana.service\n' % ('c' * 64))
    own = O.own_containers(str(root))
    assert own == [dict(runtime='podman', id='a' * 64)]
    local = O.process_info(700, str(root), own)
    assert local['container'] is None and local['unit'] == 'vllm-pd-prefill.service'
    foreign = O.process_info(701, str(root), own)
    assert foreign['container'] == 'c' * 64 and foreign['container_runtime'] == 'podman'
    # the same tree read from the host: both are in containers
    assert O.process_info(700, str(root))['container'] == 'a' * 64
    assert O.own_containers(str(tmp_path / 'nowhere')) == []


def test_parse_container_inspect():
    assert O.parse_container_inspect('%s 4711 vllm-pd-prefill\n' % ('a' * 64)) == dict(
        id='a' * 64, pid=4711, name='vllm-pd-prefill')
    assert O.parse_container_inspect('%s 0 /grafana' % ('b' * 64)) == dict(id='b' * 64, pid=None, name='grafana')
    for bad in ('', 'Error: no such container x', 'zz 1 n', '%s x n' % ('a' * 64)):
        assert O.parse_container_inspect(bad) is None
