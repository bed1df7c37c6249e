# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installed-release read: roles/engine/files/release_read.sh run on fake vllm entry points, and its
results parsed (pd_release_read) and judged (pd_release_findings)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import subprocess
import sys

import pytest

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_release_read import (
    pd_dense_keeps_rank, pd_release_findings, pd_release_read, pd_serve_has_shutdown_timeout)

SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'engine', 'files', 'release_read.sh')


def dist(site, name, version):
    d = site / ('%s-%s.dist-info' % (name.replace('-', '_'), version))
    d.mkdir(parents=True)
    (d / 'METADATA').write_text('Metadata-Version: 2.1\nName: %s\nVersion: %s\n' % (name, version))


def read(binary, env=None):
    with open(SCRIPT) as f:
        script = f.read()
    r = subprocess.run(['sh', '-c', script, 'sh', str(binary)], capture_output=True, text=True, check=False,
                       env=dict(os.environ, **(env or {})))
    return dict(item=dict(key=str(binary), kinds=['prefill', 'decode']), rc=r.returncode, stdout=r.stdout,
                stderr=r.stderr)


@pytest.fixture
def site(tmp_path):
    s = tmp_path / 'site'
    dist(s, 'vllm-ascend', '0.23.0.post1')
    dist(s, 'vllm', '0.23.0')
    return s


@pytest.mark.parametrize('first_lines', [
    '#!%s\n' % sys.executable,                                   # a plain #! line
    '#! /usr/bin/env %s\n' % os.path.basename(sys.executable),   # env and a space
    "#!/bin/sh\n'''exec' %s \"$0\" \"$@\"\n' '''\n" % sys.executable,  # pip's launcher for long paths
])
def test_the_release_is_read_in_the_python_of_the_binarys_shebang(tmp_path, site, first_lines):
    vllm = tmp_path / 'vllm'
    vllm.write_text(first_lines + 'import sys\n')
    vllm.chmod(0o755)
    env = {'PYTHONPATH': str(site), 'PATH': os.path.dirname(sys.executable) + ':' + os.environ['PATH']}
    got = pd_release_read([read(vllm, env)])
    assert got['prefill'] == got['decode']
    release = got['prefill']
    assert (release['vllm_ascend'], release['vllm'], release['error']) == ('0.23.0.post1', '0.23.0', None)
    assert pd_release_findings([dict(got['prefill'], host='p1', kind='prefill')], cluster='c1') == []


def test_a_python_without_vllm_ascend_and_a_binary_that_is_none_are_refused_by_name(tmp_path):
    vllm = tmp_path / 'vllm'
    vllm.write_text('#!%s -I\n' % sys.executable)  # isolated: sees no PYTHONPATH, so no vllm-ascend
    vllm.chmod(0o755)
    plain = pd_release_read([read(vllm)])['prefill']
    assert plain['vllm_ascend'] is None and plain['error'] is None
    found = pd_release_findings([dict(plain, host='p1', kind='prefill')], cluster='c1')
    assert [f['name'] for f in found] == ['UnsupportedRelease'] and 'no vllm-ascend distribution' in found[0]['message']
    missing = pd_release_read([read(tmp_path / 'nowhere' / 'vllm')])['decode']
    assert 'is not on PATH' in missing['error']
    binary = tmp_path / 'elf'
    binary.write_bytes(b'\x7fELF\x02\x01')
    binary.chmod(0o755)
    assert 'has no #! line' in pd_release_read([read(binary)])['prefill']['error']
    found = pd_release_findings([dict(missing, host='d1', kind='decode')], cluster='c1')
    assert [f['name'] for f in found] == ['UnsupportedRelease'] and 'could not be read' in found[0]['message']


def test_dense_keeps_rank_filter_tolerates_what_is_no_version():
    assert pd_dense_keeps_rank('0.13.0') is True and pd_dense_keeps_rank('0.23.0.post1') is False
    assert pd_dense_keeps_rank('0.23.0.post1', {'VLLM_ASCEND_BALANCE_SCHEDULING': '1'}) is True
    assert pd_dense_keeps_rank('latest') is False and pd_dense_keeps_rank('') is False


def test_serve_has_shutdown_timeout_filter_reads_one_kind_of_the_read_release():
    assert pd_serve_has_shutdown_timeout({'vllm_ascend': '0.18.0', 'vllm': '0.18.0', 'error': None}) is True
    # not read (a host without this kind, a failed read): the engine role reads vllm serve's help
    assert pd_serve_has_shutdown_timeout({}) is None and pd_serve_has_shutdown_timeout(None) is None
    assert pd_serve_has_shutdown_timeout({'vllm_ascend': None, 'vllm': None, 'error': '`vllm` (rc 127): ...'}) is None
