# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Several small files and their directories in one module call (plugins/modules/file_set.py).

One call instead of one copy task per file: the start guard's tree is about twenty files, and each copy
task costs a module run on the host and a worker on the controller (issue 16). The plan (what differs)
is pure; the host operations below it write only what differs, each file atomically."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import stat
import tempfile


def parse_mode(value, name):
    """'0644' / '644' / 420 -> 0o644; ValueError naming the parameter otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        mode = value
    else:
        text = str(value).strip()
        if not text or any(c not in '01234567' for c in text):
            raise ValueError('%s: %r is not an octal mode such as 0644' % (name, value))
        mode = int(text, 8)
    if not 0 <= mode <= 0o7777:
        raise ValueError('%s: %r is not an octal mode such as 0644' % (name, value))
    return mode


def check_path(path, name):
    if not isinstance(path, str) or not path.startswith('/') or '\0' in path:
        raise ValueError('%s: %r is not an absolute path' % (name, path))
    if '..' in path.split('/'):
        raise ValueError('%s: %r contains ..' % (name, path))
    return os.path.normpath(path)


def wanted(directories, files, dir_mode, file_mode):
    """The wanted entries, parents first: [{path, type: dir|file, mode, content (bytes, files only)}].

    files: [{path, content, mode (optional)}]. A path listed twice or listed as both kinds is an error."""
    out, seen = [], {}
    for i, d in enumerate(directories):
        p = check_path(d, 'directories[%d]' % i)
        if p in seen:
            raise ValueError('directories[%d]: %s is listed twice' % (i, p))
        seen[p] = 'dir'
        out.append({'path': p, 'type': 'dir', 'mode': dir_mode})
    for i, f in enumerate(files):
        if not isinstance(f, dict) or 'path' not in f or 'content' not in f:
            raise ValueError('files[%d]: needs path and content' % i)
        p = check_path(f['path'], 'files[%d].path' % i)
        if p in seen:
            raise ValueError('files[%d].path: %s is listed twice' % (i, p))
        seen[p] = 'file'
        mode = file_mode if f.get('mode') is None else parse_mode(f['mode'], 'files[%d].mode' % i)
        content = f['content']
        if not isinstance(content, (bytes, str)):
            raise ValueError('files[%d].content: text expected' % i)
        out.append({'path': p, 'type': 'file', 'mode': mode,
                    'content': content if isinstance(content, bytes) else content.encode('utf-8')})
    for e in out:
        if e['type'] == 'file' and seen.get(os.path.dirname(e['path'])) == 'file':
            raise ValueError('%s: its directory is listed as a file' % e['path'])
    return sorted(out, key=lambda e: (e['type'] != 'dir', e['path'].count('/'), e['path']))


def differences(want, have, uid, gid):
    """What differs between one wanted entry and what the host has (have: None when absent, else
    {type: dir|file|other, mode, uid, gid, content (files)}): [] or a list of 'absent', 'content', 'mode',
    'owner'. A different kind of entry at the path (a symlink, a directory for a file) is a ValueError."""
    if have is None:
        return ['absent']
    if have['type'] != want['type']:
        raise ValueError('%s is a %s on the host, not a %s: move it away or correct the path'
                         % (want['path'], {'dir': 'directory', 'file': 'file'}.get(have['type'], 'symlink or special file'),
                            'directory' if want['type'] == 'dir' else 'regular file'))
    out = []
    if want['type'] == 'file' and have.get('content') != want['content']:
        out.append('content')
    if have['mode'] != want['mode']:
        out.append('mode')
    if (have['uid'], have['gid']) != (uid, gid):
        out.append('owner')
    return out


def plan(entries, present, uid, gid):
    """[(entry, differences)] for the entries that differ; present(path) -> the host's state or None."""
    out = []
    for e in entries:
        d = differences(e, present(e['path']), uid, gid)
        if d:
            out.append((e, d))
    return out


# Host operations


def present(path):
    """The state of path on this host for differences() (symlinks are not followed)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    kind = 'dir' if stat.S_ISDIR(st.st_mode) else 'file' if stat.S_ISREG(st.st_mode) else 'other'
    out = {'type': kind, 'mode': stat.S_IMODE(st.st_mode), 'uid': st.st_uid, 'gid': st.st_gid}
    if kind == 'file':
        with open(path, 'rb') as f:
            out['content'] = f.read()
    return out


def apply(entry, diffs, uid, gid):
    """Make one entry as wanted (diffs from differences()); a file is replaced atomically."""
    path, mode = entry['path'], entry['mode']
    if entry['type'] == 'dir':
        missing = [path]
        while 'absent' in diffs and not os.path.lexists(os.path.dirname(missing[-1])):
            missing.append(os.path.dirname(missing[-1]))
        # like the file module: missing parents get the same mode and owner
        for d in reversed(missing) if 'absent' in diffs else []:
            os.mkdir(d, mode)
            os.chmod(d, mode)
            os.chown(d, uid, gid)
        os.chmod(path, mode)
        os.chown(path, uid, gid)
        return
    if 'absent' in diffs or 'content' in diffs:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix='.%s.' % os.path.basename(path))
        try:
            with os.fdopen(fd, 'wb') as f:
                f.write(entry['content'])
                os.fchmod(f.fileno(), mode)
                os.fchown(f.fileno(), uid, gid)
            os.rename(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return
    os.chmod(path, mode)
    os.chown(path, uid, gid)
