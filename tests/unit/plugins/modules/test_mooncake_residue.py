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
