# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stale Mooncake / Ascend files: pattern expansion and in-use detection.

A file is in use when a live process has it open (/proc/*/fd), maps it
(/proc/*/maps, also when shown as "(deleted)"), or it is the path of a live
unix socket (/proc/net/unix).  Matches are never followed through symlinks.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import fnmatch
import os
import re
import stat

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.owners import (
    list_pids, parse_socket_link, scan_fd_dirs,
)

DEFAULT_PATTERNS = ['/tmp/mooncake*', '/tmp/transfer_engine*', '/dev/shm/*mooncake*', '/dev/shm/*ascend*']
# the only directories (and their subdirectories) a pattern may clear: scratch space, never /etc or /var/lib
ALLOWED_DIRS = ('/tmp', '/var/tmp', '/dev/shm')
_DIR_FLAGS = os.O_RDONLY | getattr(os, 'O_DIRECTORY', 0) | getattr(os, 'O_NOFOLLOW', 0)
_GLOB_CHARS = re.compile(r'[*?\[]')
DELETED = ' (deleted)'


def pattern_base(pattern):
    """The literal directory a pattern lives in ('/dev/shm/*ascend*' -> '/dev/shm').

    Raises ValueError for relative patterns, patterns whose last component has no
    literal character, or globs in directory components.
    """
    if not pattern.startswith('/'):
        raise ValueError('pattern %r is not absolute' % pattern)
    parent, name = os.path.split(pattern.rstrip('/'))
    if _GLOB_CHARS.search(parent):
        raise ValueError('pattern %r has wildcards in a directory component; only the last component may '
                         'have wildcards' % pattern)
    if not name or not re.sub(r'\[[^\]]*\]|[*?]', '', name):
        raise ValueError('pattern %r matches everything in %s; it needs a literal part such as "mooncake"'
                         % (pattern, parent or '/'))
    if parent in ('', '/'):
        raise ValueError('pattern %r would match in /' % pattern)
    if any(part in ('.', '..') for part in parent.split('/')):
        raise ValueError('pattern %r has a "." or ".." directory component; write the directory plainly' % pattern)
    base = os.path.normpath(parent)
    if not any(base == d or base.startswith(d + '/') for d in ALLOWED_DIRS):
        raise ValueError('pattern %r is outside the directories stale Mooncake/Ascend files live in (%s); only '
                         'patterns there are cleared' % (pattern, ', '.join(ALLOWED_DIRS)))
    return base


def open_dir(path):
    """fd of directory path, opened one component at a time from / with O_NOFOLLOW: a symlink at any level
    raises OSError (ELOOP or ENOTDIR) instead of being followed."""
    fd = os.open('/', _DIR_FLAGS)
    try:
        for part in [p for p in path.split('/') if p]:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError:
        os.close(fd)
        raise
    return fd


def symlinked_part(path):
    """The first component of path that is a symlink (or not a directory), or None; a missing part is None."""
    cur = ''
    for part in [p for p in path.split('/') if p]:
        cur += '/' + part
        try:
            st = os.lstat(cur)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return cur
    return None


def expand(pattern):
    """Entries of the pattern's directory that match, read through a no-follow directory fd (a matching
    symlink is returned itself; a symlinked directory part raises ValueError)."""
    base = pattern_base(pattern)
    name = os.path.basename(pattern.rstrip('/'))
    bad = symlinked_part(base)
    if bad:
        raise ValueError('pattern %r goes through %s, which is a symlink or not a directory; stale files are '
                         'only cleared in real directories' % (pattern, bad))
    try:
        fd = open_dir(base)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return []
        raise ValueError('pattern %r: cannot open %s without following a symlink (%s)' % (pattern, base, e))
    try:
        names = os.listdir(fd)
    finally:
        os.close(fd)
    # like glob: a leading dot is matched only by a pattern that starts with one
    return ['%s/%s' % (base, n) for n in sorted(names)
            if fnmatch.fnmatchcase(n, name) and (not n.startswith('.') or name.startswith('.'))]


def _remove_at(dir_fd, name):
    """Remove entry name of the directory dir_fd: a directory with everything in it (entered with
    no-follow fds), anything else (a symlink itself too) unlinked."""
    if not stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        for child in os.listdir(fd):
            _remove_at(fd, child)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def remove_entry(path):
    """Remove path (a file, a symlink itself, or a directory tree) through no-follow directory fds only:
    neither its directory nor anything inside it is reached through a symlink."""
    base, name = os.path.split(path)
    fd = open_dir(base)
    try:
        _remove_at(fd, name)
    finally:
        os.close(fd)


def parse_maps_line(line):
    """(dev, inode, path, deleted) of a /proc/PID/maps line with a file path, else None."""
    parts = line.split(None, 5)
    if len(parts) < 6:
        return None
    path = parts[5].rstrip('\n')
    if not path.startswith('/'):
        return None
    deleted = path.endswith(DELETED)
    if deleted:
        path = path[:-len(DELETED)]
    try:
        major, minor = parts[3].split(':')
        dev = os.makedev(int(major, 16), int(minor, 16))
        inode = int(parts[4])
    except ValueError:
        return None
    return dev, inode, path, deleted


def parse_proc_net_unix(text):
    """{path: inode} of bound unix sockets (abstract ones skipped)."""
    out = {}
    for line in (text or '').splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8 and parts[7].startswith('/'):
            try:
                out[parts[7]] = int(parts[6])
            except ValueError:
                continue
    return out


def _under(path, dirs):
    return any(path == d or path.startswith(d + '/') for d in dirs)


def _comm(proc_root, pid):
    try:
        with open(os.path.join(proc_root, str(pid), 'comm')) as f:
            return f.read().strip()
    except (IOError, OSError):
        return None


class InUse(object):
    """What live processes hold under some directories: by (dev, inode) and by path."""

    def __init__(self):
        self.by_id = {}
        self.by_path = {}

    def add(self, key_id, path, pid):
        if key_id is not None:
            self.by_id.setdefault(key_id, set()).add(pid)
        if path is not None:
            self.by_path.setdefault(path, set()).add(pid)

    def holders(self, path, st):
        pids = set()
        if st is not None:
            pids |= self.by_id.get((st.st_dev, st.st_ino), set())
        pids |= self.by_path.get(path, set())
        return sorted(pids)


def scan_in_use(dirs, proc_root='/proc'):
    """One pass over /proc/*/fd and /proc/*/maps (and /proc/net/unix) for files under dirs."""
    dirs = [os.path.normpath(d) for d in dirs]
    real = set(dirs) | set(os.path.realpath(d) for d in dirs)
    used = InUse()
    sock_inodes = {}
    pids = list_pids(proc_root)
    for pid, fd_dir, links in scan_fd_dirs(proc_root, pids):
        for fd, target in links.items():
            inode = parse_socket_link(target)
            if inode is not None:
                sock_inodes.setdefault(inode, set()).add(pid)
                continue
            path = target[:-len(DELETED)] if target.endswith(DELETED) else target
            if not _under(path, real):
                continue
            try:
                st = os.stat(fd_dir + '/' + fd)
                used.add((st.st_dev, st.st_ino), None if target.endswith(DELETED) else path, pid)
            except OSError:
                used.add(None, path, pid)
    for pid in pids:
        try:
            with open(os.path.join(proc_root, str(pid), 'maps')) as f:
                lines = f.readlines()
        except (IOError, OSError):
            continue
        for line in lines:
            parsed = parse_maps_line(line)
            if not parsed:
                continue
            dev, inode, path, deleted = parsed
            if _under(path, real):
                used.add((dev, inode), None if deleted else path, pid)
    try:
        with open(os.path.join(proc_root, 'net', 'unix')) as f:
            unix = parse_proc_net_unix(f.read())
    except (IOError, OSError):
        unix = {}
    for path, inode in unix.items():
        if _under(path, real) and inode in sock_inodes:
            for pid in sock_inodes[inode]:
                used.add(None, path, pid)
    return used


def entry_holders(path, used):
    """[(path_in_use, [pids])] for a file, or for the files of a directory (no symlink following)."""
    try:
        st = os.lstat(path)
    except OSError:
        return []
    found = []
    pids = used.holders(path, st)
    if pids:
        found.append((path, pids))
    if stat.S_ISDIR(st.st_mode):
        for root, dirnames, files in os.walk(path, followlinks=False):
            for name in files + dirnames:
                p = os.path.join(root, name)
                try:
                    sub = os.lstat(p)
                except OSError:
                    continue
                pids = used.holders(p, sub)
                if pids:
                    found.append((p, pids))
    return found


def plan(patterns, proc_root='/proc'):
    """-> (removable [path], kept [{path, in_use_path, pid, pids, process}])."""
    entries = []
    dirs = set()
    for pat in patterns:
        dirs.add(pattern_base(pat))
        for m in expand(pat):
            if m not in entries:
                entries.append(m)
    if not entries:
        return [], []
    used = scan_in_use(sorted(dirs), proc_root)
    removable, kept = [], []
    for e in entries:
        held = entry_holders(e, used)
        if not held:
            removable.append(e)
            continue
        inner, pids = held[0]
        kept.append(dict(path=e, in_use_path=inner, pid=pids[0], pids=pids, process=_comm(proc_root, pids[0])))
    return removable, kept


# Log pruning: vllm-ascend 0.23 writes every vllm log line also to ~/ascend/log/vllm_ascend/vllm_ascend_<ts>_<pid>.log
# (logger.py, a new file each start, never pruned) and CANN its plogs under ~/ascend/log (or ASCEND_PROCESS_LOG_PATH).
LOG_SUFFIX = '.log'
# never walked for logs, whatever the inventory says
SYSTEM_DIRS = ('/proc', '/sys', '/dev', '/etc', '/usr', '/boot', '/bin', '/sbin', '/lib', '/lib64', '/run')


def log_dir_problem(path):
    """Why PATH cannot be pruned for old logs (a sentence), or None."""
    if not isinstance(path, str) or not path.startswith('/'):
        return 'log directory %r is not an absolute path' % (path,)
    norm = os.path.normpath(path)
    if norm == '/' or any(part in ('.', '..') for part in path.split('/')):
        return 'log directory %r is / or has a "." or ".." component' % path
    if _under(norm, SYSTEM_DIRS):
        return 'log directory %r is a system directory' % path
    bad = symlinked_part(norm)
    if bad:
        return 'log directory %r goes through %s, which is a symlink or not a directory' % (path, bad)
    return None


def old_logs(log_dirs, max_age_s, now, proc_root='/proc'):
    """Files named *.log under LOG_DIRS (walked without following symlinks; regular files only) whose last change
    is more than MAX_AGE_S seconds before NOW -> (removable [path], kept [{path, in_use_path, pid, pids, process}]):
    a file a live process holds (open or mapped) is kept. ValueError names a directory that cannot be pruned."""
    for d in log_dirs:
        problem = log_dir_problem(d)
        if problem:
            raise ValueError(problem)
    dirs = [os.path.normpath(d) for d in log_dirs]
    found = []
    for d in dirs:
        for root, _dirnames, files in os.walk(d, followlinks=False):
            for name in sorted(files):
                path = os.path.join(root, name)
                if not name.endswith(LOG_SUFFIX) or path in found:
                    continue
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and now - st.st_mtime > max_age_s:
                    found.append(path)
    if not found:
        return [], []
    used = scan_in_use(dirs, proc_root)
    removable, kept = [], []
    for path in found:
        try:
            pids = used.holders(path, os.lstat(path))
        except OSError:
            continue
        if pids:
            kept.append(dict(path=path, in_use_path=path, pid=pids[0], pids=pids, process=_comm(proc_root, pids[0])))
        else:
            removable.append(path)
    return removable, kept
