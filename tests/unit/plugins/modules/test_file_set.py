# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import grp
import os
import pwd
import stat

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.guard.guard_files import PREFIX, guard_tree
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import file_set as F
from ansible_collections.vllm_pd.ascend.plugins.modules import file_set as M

ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


def args(tmp_path, **kw):
    base = dict(owner=ME, group=MY_GROUP,
                directories=[str(tmp_path / 'lib' / 'pkg'), str(tmp_path / 'etc')],
                files=[dict(path=str(tmp_path / 'lib' / 'pkg' / '__init__.py'), content=''),
                       dict(path=str(tmp_path / 'etc' / 'a.json'), content='{\n    "a": 1\n}\n'),
                       dict(path=str(tmp_path / 'etc' / 'run'), content='#!/bin/sh\n', mode='0700')])
    base.update(kw)
    return base


def mode(path):
    return stat.S_IMODE(os.lstat(str(path)).st_mode)


def test_writes_everything_then_nothing(run_module, tmp_path):
    failed, res = run_module(M, args(tmp_path))
    assert not failed and res['changed'], res
    # parents first; the missing parent lib/ is created with the directory's mode
    assert res['changed_paths'][:2] == [str(tmp_path / 'etc'), str(tmp_path / 'lib' / 'pkg')]
    assert (tmp_path / 'etc' / 'a.json').read_text() == '{\n    "a": 1\n}\n'
    assert (tmp_path / 'lib' / 'pkg' / '__init__.py').read_text() == ''
    assert mode(tmp_path / 'etc' / 'run') == 0o700 and mode(tmp_path / 'etc' / 'a.json') == 0o644
    assert mode(tmp_path / 'lib') == 0o755 and mode(tmp_path / 'lib' / 'pkg') == 0o755
    failed, res = run_module(M, args(tmp_path))
    assert not failed and not res['changed'] and res['changed_paths'] == []
    assert sorted(os.listdir(str(tmp_path / 'etc'))) == ['a.json', 'run']  # no temporary file left


def test_only_what_differs_and_check_mode(run_module, tmp_path):
    run_module(M, args(tmp_path))
    (tmp_path / 'etc' / 'a.json').write_text('old\n')
    os.chmod(str(tmp_path / 'etc' / 'run'), 0o755)
    failed, res = run_module(M, dict(args(tmp_path), _ansible_check_mode=True, _ansible_diff=True))
    assert not failed and res['changed']
    assert res['differences'] == {str(tmp_path / 'etc' / 'a.json'): ['content'], str(tmp_path / 'etc' / 'run'): ['mode']}
    assert (tmp_path / 'etc' / 'a.json').read_text() == 'old\n' and mode(tmp_path / 'etc' / 'run') == 0o755
    assert 'a.json: content' in res['diff']['before']
    failed, res = run_module(M, args(tmp_path))
    assert not failed and res['changed_paths'] == [str(tmp_path / 'etc' / 'a.json'), str(tmp_path / 'etc' / 'run')]
    assert (tmp_path / 'etc' / 'a.json').read_text() == '{\n    "a": 1\n}\n' and mode(tmp_path / 'etc' / 'run') == 0o700


def test_refuses_a_symlink_and_changes_nothing(run_module, tmp_path):
    (tmp_path / 'etc').mkdir()
    target = tmp_path / 'precious'
    target.write_text('keep')
    os.symlink(str(target), str(tmp_path / 'etc' / 'a.json'))
    failed, res = run_module(M, args(tmp_path))
    assert failed and 'a.json is a symlink or special file on the host' in res['msg']
    assert target.read_text() == 'keep' and not (tmp_path / 'lib').exists()


@pytest.mark.parametrize('kw, needle', [
    (dict(directories=['relative/dir']), "directories[0]: 'relative/dir' is not an absolute path"),
    (dict(files=[dict(path='/tmp/a', content='x'), dict(path='/tmp/a', content='y')]), 'files[1].path: /tmp/a is listed twice'),
    (dict(files=[dict(path='/tmp/a', content='x', mode='rw')]), "files[0].mode: 'rw' is not an octal mode"),
    (dict(file_mode='99999'), "file_mode: '99999' is not an octal mode"),
    (dict(owner='no-such-user-vllm-pd'), 'owner: no user no-such-user-vllm-pd'),
])
def test_bad_parameters_name_themselves(run_module, tmp_path, kw, needle):
    failed, res = run_module(M, dict(args(tmp_path), **kw))
    assert failed and needle in res['msg'], res['msg']
    assert not (tmp_path / 'etc').exists()


def test_differences_is_pure():
    want = {'path': '/x', 'type': 'file', 'mode': 0o644, 'content': b'a'}
    assert F.differences(want, None, 0, 0) == ['absent']
    assert F.differences(want, {'type': 'file', 'mode': 0o600, 'uid': 1, 'gid': 0, 'content': b'b'}, 0, 0) == \
        ['content', 'mode', 'owner']
    assert F.differences(want, {'type': 'file', 'mode': 0o644, 'uid': 0, 'gid': 0, 'content': b'a'}, 0, 0) == []
    with pytest.raises(ValueError, match='/x is a directory on the host, not a regular file'):
        F.differences(want, {'type': 'dir', 'mode': 0o755, 'uid': 0, 'gid': 0}, 0, 0)


def test_start_guard_root_writes_the_guard_tree_with_the_given_files_then_nothing(run_module, tmp_path):
    root = tmp_path / 'guard'
    failed, res = run_module(M, args(tmp_path, start_guard_root=str(root)))
    assert not failed and res['changed'], res
    dirs, files = guard_tree(str(root))
    assert set(dirs + [f['path'] for f in files]) <= set(res['changed_paths'])
    for f in files:
        assert (tmp_path / f['path']).read_text() == f['content'], f['path']
    assert (root / PREFIX.replace('.', '/') / 'guard' / 'start_guard.py').stat().st_size > 1000
    assert (tmp_path / 'etc' / 'a.json').exists()
    failed, res = run_module(M, args(tmp_path, start_guard_root=str(root)))
    assert not failed and not res['changed']
