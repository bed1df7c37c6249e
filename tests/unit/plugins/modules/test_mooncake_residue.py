# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible_collections.vllm_pd.ascend.plugins.modules import mooncake_residue as M


def seed(tmp_path):
    shm = tmp_path / 'shm'
    shm.mkdir()
    (shm / 'mooncake_seg_0').write_text('x')
    (shm / 'vllm_ascend_buf').write_text('x')
    (shm / 'keep_me').write_text('x')
    d = tmp_path / 'tmp' / 'transfer_engine_meta'
    (d / 'sub').mkdir(parents=True)
    (d / 'sub' / 'f').write_text('x')
    precious = tmp_path / 'precious'
    precious.mkdir()
    (precious / 'data').write_text('important')
    os.symlink(str(precious), str(shm / 'mooncake_link'))
    pats = [str(shm / '*mooncake*'), str(shm / '*ascend*'), str(tmp_path / 'tmp' / 'transfer_engine*')]
    return shm, pats, precious


def test_check_mode_and_diff(run_module, tmp_path):
    shm, pats, _precious = seed(tmp_path)
    held = open(str(shm / 'vllm_ascend_buf'))
    try:
        failed, res = run_module(M, dict(patterns=pats, _ansible_check_mode=True, _ansible_diff=True))
    finally:
        held.close()
    assert not failed and res['changed']
    assert sorted(os.path.basename(p) for p in res['removed']) == ['mooncake_link', 'mooncake_seg_0',
                                                                   'transfer_engine_meta']
    assert res['kept_in_use'][0]['pid'] == os.getpid() and res['kept_in_use'][0]['process']
    assert (shm / 'mooncake_seg_0').exists()
    assert 'mooncake_seg_0' in res['diff']['before'] and 'mooncake_seg_0' not in res['diff']['after']
    assert 'vllm_ascend_buf' in res['diff']['after']


def test_removes_unused_keeps_in_use_and_never_follows_links(run_module, tmp_path):
    shm, pats, precious = seed(tmp_path)
    held = open(str(shm / 'vllm_ascend_buf'))
    try:
        failed, res = run_module(M, dict(patterns=pats))
    finally:
        held.close()
    assert not failed and res['changed']
    assert not (shm / 'mooncake_seg_0').exists() and not os.path.lexists(str(shm / 'mooncake_link'))
    assert not (tmp_path / 'tmp' / 'transfer_engine_meta').exists()
    assert (shm / 'vllm_ascend_buf').exists() and (shm / 'keep_me').exists()
    assert (precious / 'data').read_text() == 'important'
    assert [k['path'] for k in res['kept_in_use']] == [str(shm / 'vllm_ascend_buf')]
    failed, res = run_module(M, dict(patterns=pats[:1]))
    assert not failed and not res['changed'] and res['removed'] == []


def test_refuses_broad_pattern(run_module, tmp_path):
    failed, res = run_module(M, dict(patterns=[str(tmp_path) + '/*']))
    assert failed and 'refusing pattern' in res['msg']


def test_old_engine_logs_are_pruned_only_with_a_retention_and_never_a_held_one(run_module, tmp_path):
    logs = tmp_path / 'ascend' / 'log' / 'vllm_ascend'
    logs.mkdir(parents=True)
    old, held, young = (logs / 'vllm_ascend_1_1.log', logs / 'vllm_ascend_2_2.log', logs / 'vllm_ascend_3_3.log')
    for path, days in ((old, 20), (held, 20), (young, 2)):
        path.write_text('x')
        os.utime(str(path), (os.path.getmtime(str(path)) - days * 86400,) * 2)
    args = dict(patterns=[], log_dirs=[str(tmp_path / 'ascend' / 'log')])
    failed, res = run_module(M, dict(args))  # no retention: every log stays
    assert not failed and not res['changed'] and res['pruned_logs'] == [] and old.exists()
    with open(str(held)):
        failed, res = run_module(M, dict(args, log_retention_days=7, _ansible_check_mode=True))
        assert not failed and res['changed'] and res['pruned_logs'] == [str(old)] and old.exists()
        failed, res = run_module(M, dict(args, log_retention_days=7))
    assert not failed and res['pruned_logs'] == [str(old)] and not old.exists()
    assert held.exists() and young.exists() and [k['path'] for k in res['kept_in_use']] == [str(held)]
    failed, res = run_module(M, dict(patterns=[], log_dirs=['/etc'], log_retention_days=7))
    assert failed and 'system directory' in res['msg']
