# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import mmap
import os
import socket

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import residue as R


@pytest.mark.parametrize('pattern, base', [
    ('/tmp/mooncake*', '/tmp'),
    ('/dev/shm/*ascend*', '/dev/shm'),
    ('/var/tmp/x/vllm_?', '/var/tmp/x'),
])
def test_pattern_base(pattern, base):
    assert R.pattern_base(pattern) == base


@pytest.mark.parametrize('pattern', ['tmp/mooncake*', '/tmp/*', '/tmp/*/mooncake', '/mooncake*', '/tmp/[ab]*?'])
def test_pattern_base_refuses(pattern):
    with pytest.raises(ValueError):
        R.pattern_base(pattern)


def test_parse_maps_line():
    dev, ino, path, deleted = R.parse_maps_line(
        '7f00-7f10 rw-s 00000000 00:1a 1234                       /dev/shm/mooncake_seg (deleted)\n')
    assert (dev, ino, path, deleted) == (os.makedev(0, 0x1a), 1234, '/dev/shm/mooncake_seg', True)
    assert R.parse_maps_line('7f00-7f10 rw-p 00000000 00:00 0 [heap]\n') is None
    assert R.parse_maps_line('7f00-7f10 rw-p 00000000 00:00 0\n') is None


def test_parse_proc_net_unix():
    text = ('Num       RefCount Protocol Flags    Type St Inode Path\n'
            '0000000000000000: 00000002 00000000 00010000 0001 01 4242 /tmp/mooncake.sock\n'
            '0000000000000000: 00000002 00000000 00010000 0001 01 4243 @abstract\n'
            '0000000000000000: 00000002 00000000 00000000 0001 03 4244\n')
    assert R.parse_proc_net_unix(text) == {'/tmp/mooncake.sock': 4242}


@pytest.fixture
def area(tmp_path):
    d = tmp_path / 'shm'
    d.mkdir()
    return d


def pats(area):
    return [str(area / 'mooncake*'), str(area / '*ascend*'), str(area / 'transfer_engine*')]


def test_plan_keeps_open_mapped_and_socket_files(area, tmp_path):
    stale = area / 'mooncake_stale'
    stale.write_text('x')
    opened = area / 'mooncake_open'
    opened.write_text('x')
    mapped = area / 'ascend_hbm_0'
    mapped.write_bytes(b'\0' * 4096)
    d_busy = area / 'transfer_engine_busy'
    d_busy.mkdir()
    (d_busy / 'inner').write_text('x')
    d_idle = area / 'transfer_engine_idle'
    (d_idle / 'sub').mkdir(parents=True)
    (d_idle / 'sub' / 'f').write_text('x')
    outside = tmp_path / 'precious'
    outside.write_text('keep me')
    link = area / 'mooncake_link'
    os.symlink(str(outside), str(link))
    other = area / 'unrelated'
    other.write_text('x')
    sock_path = area / 'mooncake.sock'

    f_open = open(str(opened))
    f_inner = open(str(d_busy / 'inner'))
    fm = open(str(mapped), 'r+b')
    m = mmap.mmap(fm.fileno(), 4096)
    fm.close()                  # only the mapping keeps it in use now
    us = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    us.bind(str(sock_path))
    us.listen(1)
    try:
        removable, kept = R.plan(pats(area))
    finally:
        f_open.close()
        f_inner.close()
        m.close()
        us.close()
    assert sorted(os.path.basename(p) for p in removable) == [
        'mooncake_link', 'mooncake_stale', 'transfer_engine_idle']
    byname = dict((os.path.basename(k['path']), k) for k in kept)
    assert sorted(byname) == ['ascend_hbm_0', 'mooncake.sock', 'mooncake_open', 'transfer_engine_busy']
    assert byname['mooncake_open']['pid'] == os.getpid()
    assert byname['transfer_engine_busy']['in_use_path'] == str(d_busy / 'inner')
    assert byname['ascend_hbm_0']['process']


def test_mapped_deleted_file_is_not_confused_with_new_file(area):
    """A mapping of a deleted file (maps says "(deleted)") must not protect a new file of the same name."""
    p = area / 'mooncake_seg'
    p.write_bytes(b'\0' * 4096)
    f = open(str(p), 'r+b')
    m = mmap.mmap(f.fileno(), 4096)
    f.close()
    os.unlink(str(p))
    p.write_bytes(b'\1' * 4096)     # new inode, same name
    try:
        removable, kept = R.plan([str(area / 'mooncake*')])
    finally:
        m.close()
    assert removable == [str(p)] and kept == []


def test_plan_nothing(area):
    assert R.plan([str(area / 'mooncake*')]) == ([], [])


def test_remove_entry_removes_a_tree_but_never_what_a_symlink_in_it_points_to(tmp_path):
    precious = tmp_path / 'precious'
    (precious / 'deep').mkdir(parents=True)
    (precious / 'deep' / 'data').write_text('keep')
    tree = tmp_path / 'shm' / 'mooncake_dir'
    (tree / 'a' / 'b').mkdir(parents=True)
    (tree / 'a' / 'b' / 'seg').write_text('x')
    (tree / 'top').write_text('y')
    os.symlink(str(precious), str(tree / 'a' / 'to_precious'))
    R.remove_entry(str(tree))
    assert not tree.exists() and (tmp_path / 'shm').is_dir()
    assert (precious / 'deep' / 'data').read_text() == 'keep'
    # a symlink given as the entry goes, its target stays
    link = tmp_path / 'shm' / 'mooncake_link'
    os.symlink(str(precious), str(link))
    R.remove_entry(str(link))
    assert not os.path.lexists(str(link)) and (precious / 'deep' / 'data').read_text() == 'keep'


def _log(path, age_days, now, text='x'):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(str(path), (now - age_days * 86400, now - age_days * 86400))
    return str(path)


def test_old_logs_are_pruned_but_never_one_a_live_process_holds(tmp_path):
    now = 2000000000.0
    base = tmp_path / 'ascend' / 'log'
    old = _log(base / 'vllm_ascend' / 'vllm_ascend_20261101_120000_42.log', 30, now)
    plog = _log(base / 'debug' / 'plog' / 'plog-42_20261101.log', 30, now)
    young = _log(base / 'vllm_ascend' / 'vllm_ascend_20261204_120000_43.log', 1, now)
    other = _log(base / 'vllm_ascend' / 'notes.txt', 30, now)
    held = _log(base / 'vllm_ascend' / 'vllm_ascend_20261101_130000_44.log', 30, now)
    outside = _log(tmp_path / 'elsewhere' / 'old.log', 30, now)
    (base / 'linked').symlink_to(tmp_path / 'elsewhere')  # never followed
    with open(held) as f:  # this process holds it open, as a running engine holds its log
        os.utime(held, (now - 30 * 86400, now - 30 * 86400))
        removable, kept = R.old_logs([str(base)], 14 * 86400, now)
    assert sorted(removable) == sorted([old, plog]) and f.closed
    assert [k['path'] for k in kept] == [held] and kept[0]['pid'] == os.getpid()
    assert young not in removable and other not in removable and outside not in removable


@pytest.mark.parametrize('path, words', [
    ('ascend/log', 'not an absolute path'), ('/', 'is /'), ('/etc/ascend', 'system directory'),
    ('/root/../etc', '".."'),
])
def test_log_dirs_that_are_never_pruned(path, words):
    assert words in R.log_dir_problem(path)
    with pytest.raises(ValueError, match='log directory'):
        R.old_logs([path], 1, 0)


def test_a_log_dir_through_a_symlink_is_refused(tmp_path):
    (tmp_path / 'real').mkdir()
    (tmp_path / 'link').symlink_to(tmp_path / 'real')
    assert 'symlink' in R.log_dir_problem(str(tmp_path / 'link' / 'log'))
    assert R.old_logs([str(tmp_path / 'missing')], 1, 0) == ([], [])
