# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installed-release read of module pd_host_read: its commands (read_targets), its script (release_read.SCRIPT)
run on fake vllm entry points, what each answer says (release_record) and how it is judged (pd_release_findings)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import subprocess
import sys

import pytest

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_release_findings import (
    pd_dense_keeps_rank, pd_release_findings, pd_serve_has_shutdown_timeout)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.release_read import SCRIPT, read_targets, release_record


def dist(site, name, version):
    d = site / ('%s-%s.dist-info' % (name.replace('-', '_'), version))
    d.mkdir(parents=True)
    (d / 'METADATA').write_text('Metadata-Version: 2.1\nName: %s\nVersion: %s\n' % (name, version))


def read(binary, env=None):
    """What pd_host_read makes of the read of BINARY on this host."""
    target, = read_targets([dict(SETTINGS, kind='prefill', binary=str(binary))])
    r = subprocess.run(target['argv'], capture_output=True, text=True, check=False, env=dict(os.environ, **(env or {})))
    return release_record(target['key'], r.returncode, r.stdout, r.stderr)


SETTINGS = {'binary': 'vllm', 'runtime': 'systemd', 'container_engine': 'podman', 'container_image': ''}


def kind(name, **extra):
    out = dict(SETTINGS, kind=name)
    out.update(extra)
    return out


def test_release_targets_one_read_per_binary():
    assert read_targets([kind('prefill'), kind('decode')]) == [
        {'key': 'vllm', 'kinds': ['prefill', 'decode'], 'argv': ['sh', '-c', SCRIPT, 'sh', 'vllm']}]
    assert read_targets([kind('decode', binary='/opt/v/vllm')]) == [
        {'key': '/opt/v/vllm', 'kinds': ['decode'], 'argv': ['sh', '-c', SCRIPT, 'sh', '/opt/v/vllm']}]
    assert read_targets([]) == []


def test_release_targets_container_runtime_reads_in_the_image():
    image = kind('prefill', runtime='container', container_image='reg/img:1')
    assert read_targets([image, kind('decode')]) == [
        {'key': 'podman reg/img:1 vllm', 'kinds': ['prefill'],
         'argv': ['podman', 'run', '--rm', '--net=none', '--entrypoint', 'sh', 'reg/img:1', '-c', SCRIPT, 'sh', 'vllm']},
        {'key': 'vllm', 'kinds': ['decode'], 'argv': ['sh', '-c', SCRIPT, 'sh', 'vllm']}]
    same = read_targets([image, dict(image, kind='decode')])
    assert [t['kinds'] for t in same] == [['prefill', 'decode']]
    other = read_targets([image, dict(image, kind='decode', container_engine='docker')])
    assert [t['key'] for t in other] == ['podman reg/img:1 vllm', 'docker reg/img:1 vllm']


def test_an_engine_that_did_not_run_is_an_error_with_its_message():
    got = release_record('podman img vllm', 2, '', '', "[Errno 2] No such file or directory: 'podman'")
    assert got == dict(vllm_ascend=None, vllm=None, python=None, where='podman img vllm',
                       error="`podman img vllm` (rc 2): [Errno 2] No such file or directory: 'podman'")
    assert release_record('vllm', 0, 'noise\nnot json', '')['error'] == '`vllm` (rc 0): noise\nnot json'


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
    release = read(vllm, env)
    assert (release['vllm_ascend'], release['vllm'], release['error']) == ('0.23.0.post1', '0.23.0', None)
    assert pd_release_findings([dict(release, host='p1', kind='prefill')], cluster='c1') == []


def test_a_python_without_vllm_ascend_and_a_binary_that_is_none_are_refused_by_name(tmp_path):
    vllm = tmp_path / 'vllm'
    vllm.write_text('#!%s -I\n' % sys.executable)  # isolated: sees no PYTHONPATH, so no vllm-ascend
    vllm.chmod(0o755)
    plain = read(vllm)
    assert plain['vllm_ascend'] is None and plain['error'] is None
    found = pd_release_findings([dict(plain, host='p1', kind='prefill')], cluster='c1')
    assert [f['name'] for f in found] == ['UnsupportedRelease'] and 'no vllm-ascend distribution' in found[0]['message']
    missing = read(tmp_path / 'nowhere' / 'vllm')
    assert 'is not on PATH' in missing['error']
    binary = tmp_path / 'elf'
    binary.write_bytes(b'\x7fELF\x02\x01')
    binary.chmod(0o755)
    assert 'has no #! line' in read(binary)['error']
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
