# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import resource
import socket
import subprocess
import sys

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import fd_scan as F


def table(fds):
    """readlink and listdir over a fake fd table {fd: target}, counting the calls."""
    calls = dict(readlink=0, listdir=0)

    def readlink(name):
        calls['readlink'] += 1
        if int(name) not in fds:
            raise OSError(2, 'No such file or directory')
        return fds[int(name)]

    def listdir():
        calls['listdir'] += 1
        return [str(fd) for fd in fds]
    return readlink, listdir, calls


def test_a_dense_table_is_read_by_number_without_listing():
    fds = dict((fd, 'socket:[%d]' % (1000 + fd)) for fd in range(400))
    readlink, listdir, calls = table(fds)
    assert sorted(F.probe_links(readlink, len(fds), listdir)) == sorted(fds.values())
    assert calls == dict(readlink=400, listdir=0)


def test_holes_fall_back_to_the_listing_and_every_fd_is_read_once():
    # a table with a hole wider than PROBE_MAX_GAP, then fds far above it
    fds = dict((fd, 'pipe:[%d]' % fd) for fd in list(range(300)) + list(range(400, 410)) + [70000])
    readlink, listdir, calls = table(fds)
    got = list(F.probe_links(readlink, len(fds), listdir))
    assert sorted(got) == sorted(fds.values()) and len(got) == len(fds)
    assert calls['listdir'] == 1
    assert calls['readlink'] == 300 + F.PROBE_MAX_GAP + 11


def test_a_small_or_uncounted_table_is_listed():
    fds = {0: 'a', 1: 'b', 255: 'c'}
    for count in (3, 0):
        readlink, listdir, calls = table(fds)
        assert sorted(F.probe_links(readlink, count, listdir)) == ['a', 'b', 'c']
        assert calls == dict(readlink=3, listdir=1)


def test_a_count_that_is_too_high_still_ends_with_every_fd():
    # fds closed between the count and the reads: the probe stops at the gap, the listing has the rest
    fds = dict((fd, str(fd)) for fd in range(300))
    readlink, listdir, calls = table(fds)
    assert len(list(F.probe_links(readlink, 500, listdir))) == 300
    assert calls['listdir'] == 1


def test_fds_closed_while_listed_are_skipped():
    fds = dict((fd, str(fd)) for fd in range(5))

    def readlink(name):
        if name == '3':
            raise OSError(2, 'gone')
        return fds[int(name)]
    assert sorted(F.probe_links(readlink, 0, lambda: [str(fd) for fd in fds])) == ['0', '1', '2', '4']


CHILD = r'''
import os, resource, socket, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (2048, 2048))
keep = [socket.socket() for _ in range(int(sys.argv[1]))]
listener = socket.socket()
listener.bind(('127.0.0.1', 0))
listener.listen(1)
if os.fork() == 0:          # the child inherits every fd, the listener too
    sys.stdout.write('%d %d\n' % (os.getpid(), os.fstat(listener.fileno()).st_ino))
    sys.stdout.flush()
    sys.stdin.read()
    os._exit(0)
sys.stdin.read()
'''


@pytest.mark.skipif(not os.path.isdir('/proc/self/fd'), reason='needs /proc')
def test_every_holder_of_a_socket_is_found_also_the_forked_child_with_many_fds():
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 2048:
        pytest.skip('RLIMIT_NOFILE hard limit below 2048')
    proc = subprocess.Popen([sys.executable, '-c', CHILD, '1000'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            universal_newlines=True)
    try:
        child, inode = [int(x) for x in proc.stdout.readline().split()]
        pids = [int(n) for n in os.listdir('/proc') if n.isdigit()]
        found = F.socket_holders([inode, 0], pids)
        assert found == {inode: sorted([proc.pid, child])}
        # the listing alone finds the same
        assert F.socket_holders([inode], pids, count_fds=False) == found
    finally:
        proc.stdin.close()
        proc.wait()


def test_no_wanted_inode_reads_nothing(tmp_path):
    assert F.socket_holders([0], [1, 2], str(tmp_path)) == {}
    s = socket.socket()
    try:
        assert F.socket_holders([os.fstat(s.fileno()).st_ino], [999999999]) == {}
    finally:
        s.close()
