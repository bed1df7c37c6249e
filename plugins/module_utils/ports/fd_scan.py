# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which processes hold given socket inodes: every fd of every visible process, read once, cheaply.

The kernel keeps no map from a socket to the processes holding it (ss -p and lsof walk /proc too), and a
socket can sit in any process: a forked child, a service handed a socket by systemd, a receiver of
SCM_RIGHTS, in another cgroup or network namespace. So every fd of every process is read; what this
saves is the work around each read (issue 22; 16,000 sockets in four processes):

- A process with many fds is read without listing its fd directory: Linux >= 6.2 reports the number
  of open fds as the size of /proc/PID/fd, and the kernel hands out the lowest free fd number, so the
  numbers 0, 1, 2, ... are read until that many links were found. A run of missing numbers (a table
  with holes) falls back to the listing for the fds not read yet, so no fd is skipped.
- A link is compared as text with the wanted 'socket:[INODE]' strings; nothing else is kept.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

# below this many fds the listing (one getdents call) costs less than probing numbers
PROBE_MIN_FDS = 256
# missing numbers in a row before the listing is read instead (a table with holes)
PROBE_MAX_GAP = 32


def probe_links(readlink, count, listdir):
    """Yield the link target of every fd of one process.

    readlink(name) -> target, raising OSError when fd `name` is not open; count: the number of open fds
    the kernel reports (0 or less when unknown); listdir() -> the fd names. With count >= PROBE_MIN_FDS,
    numbers are probed from 0 until count targets were read; after PROBE_MAX_GAP missing numbers in a
    row, or at the end of the probe, the fds not read yet come from listdir(). Fds that close while
    being read are skipped, as they are by a listing.
    """
    done = set()
    if count >= PROBE_MIN_FDS:
        fd = gap = 0
        while len(done) < count and gap < PROBE_MAX_GAP:
            name = str(fd)
            fd += 1
            try:
                target = readlink(name)
            except OSError:
                gap += 1
                continue
            gap = 0
            done.add(name)
            yield target
        if len(done) >= count:
            return
    for name in listdir():
        if name in done:
            continue
        try:
            yield readlink(name)
        except OSError:
            continue


def fd_count(dir_fd):
    """Open fds of the process whose /proc/PID/fd is dir_fd (Linux >= 6.2), else 0."""
    try:
        return os.fstat(dir_fd).st_size
    except OSError:
        return 0


def socket_holders(inodes, pids, proc_root='/proc', count_fds=True):
    """{inode: sorted [pid, ...]} for the wanted socket inodes, reading every fd of every pid once.

    count_fds: trust the size of proc_root/PID/fd as the fd count (only the kernel's /proc does that;
    a fixture tree's directory size is no fd count).
    """
    wanted = dict(('socket:[%d]' % i, i) for i in inodes if i)
    found = {}
    if not wanted:
        return found
    for pid in pids:
        try:
            dir_fd = os.open(os.path.join(proc_root, str(pid), 'fd'), os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue    # exited, or not ours to read without become
        try:
            links = probe_links(lambda name: os.readlink(name, dir_fd=dir_fd),
                                fd_count(dir_fd) if count_fds else 0, lambda: os.listdir(dir_fd))
            for target in links:
                inode = wanted.get(target)
                if inode is not None:
                    found.setdefault(inode, set()).add(pid)
        except OSError:
            pass        # the process exited while its fds were listed
        finally:
            os.close(dir_fd)
    return dict((k, sorted(v)) for k, v in found.items())
