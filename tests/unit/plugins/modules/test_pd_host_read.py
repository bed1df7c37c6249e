# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module pd_host_read driven through its main(): the commands it runs faked, the files of this machine read."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import threading

from ansible.module_utils import basic

from ansible_collections.vllm_pd.ascend.plugins.modules import pd_host_read as M

UNITS = 'vllm-pd-prefill.service loaded active running P\nvllm-pd-proxy.service loaded active running X\n'
ADDR = '2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0\\       valid_lft forever preferred_lft forever\n'


def fake(monkeypatch, answers):
    """run_command answers by argv[0] (and argv[1]); an answer that is an exception is raised."""
    ran = []

    def run_command(self, argv, **_kwargs):
        ran.append(argv)
        got = answers.get(' '.join(argv[:2])) or answers.get(argv[0])
        if isinstance(got, Exception):
            raise got
        return got

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    return ran


def test_the_host_read_in_check_mode(run_module, monkeypatch, tmp_path):
    (tmp_path / 'config.json').write_text(json.dumps({'num_experts': 8}))
    release = json.dumps({'python': '/usr/bin/python3', 'vllm-ascend': '0.23.0', 'vllm': '0.23.0'})
    ran = fake(monkeypatch, {'systemctl list-units': (0, UNITS, ''), 'ip': (0, ADDR, ''), 'sh': (0, release + '\n', ''),
                             'systemctl show': (0, '%d\n' % os.getpid(), '')})
    failed, res = run_module(M, dict(host='p1', model=dict(path=str(tmp_path)), host_facts=True, launch=True,
                                     engines=[dict(kind='prefill'), dict(kind='decode')], _ansible_check_mode=True))
    assert not failed and not res['changed']
    assert res['model']['kind'] == 'moe' and res['model']['resolved_kind'] == 'moe'
    assert res['release']['prefill'] == res['release']['decode'] == dict(
        vllm_ascend='0.23.0', vllm='0.23.0', python='/usr/bin/python3', error=None, where='vllm')
    assert [a[0] for a in ran].count('sh') == 1  # P and D share the binary: one read
    assert res['active_units'] == ['vllm-pd-prefill.service', 'vllm-pd-proxy.service']
    assert res['network']['eth0']['ipv4'] == {'address': '10.0.0.5', 'prefix': '24'} and 'eth0' in res['network']['interfaces']
    assert isinstance(res['machine'], str) and isinstance(res['hccn_text'], str)
    # the proxy is no engine: only the prefill unit's command line is read (here: this test's own process)
    assert ['systemctl', 'show', '--property=MainPID', '--value', '--', 'vllm-pd-prefill.service'] in ran
    assert list(res['launch']) == ['vllm-pd-prefill.service'] and res['running'] == []


def test_only_what_is_asked_is_read(run_module, monkeypatch):
    ran = fake(monkeypatch, {'podman': OSError(2, 'No such file or directory')})
    failed, res = run_module(M, dict(host='p1', engines=[dict(kind='decode', runtime='container', container_image='img')]))
    assert not failed and ran[0][:2] == ['podman', 'run']
    assert res['release']['decode']['error'].startswith('`podman img vllm` (rc ')
    assert 'model' not in res and 'unit_lines' not in res and res['running'] == []


def test_a_failing_systemctl_fails_the_host_naming_the_fix(run_module, monkeypatch):
    fake(monkeypatch, {'systemctl': (1, '', 'System has not been booted with systemd as init system (PID 1).')})
    failed, res = run_module(M, dict(host='p1', host_facts=True))
    assert failed and res['msg'].startswith('host p1: `systemctl list-units')
    assert 'booted with systemd' in res['msg'] and 'Fix:' in res['msg']


def test_a_missing_ip_fails_the_host_naming_the_fix(run_module, monkeypatch):
    fake(monkeypatch, {'systemctl': (0, '', ''), 'ip': OSError(2, "No such file or directory: 'ip'")})
    failed, res = run_module(M, dict(host='p1', host_facts=True))
    assert failed and res['msg'].startswith('cannot read the addresses of host p1') and 'install iproute2' in res['msg']


def test_proxy_python_is_asked_only_when_given(run_module, monkeypatch):
    ran = fake(monkeypatch, {'/opt/proxy/bin/python': (0, '{"python": "3.11.2", "problems": ["it cannot import httpx"]}', '')})
    failed, res = run_module(M, dict(host='p1', proxy=dict(python='/opt/proxy/bin/python', script='/opt/proxy.py',
                                                           min_python='3.10', modules=['vllm.logger'])))
    assert not failed and res['proxy_python'] == dict(python='3.11.2', problems=['it cannot import httpx'])
    (argv,) = ran
    assert argv[:2] == ['/opt/proxy/bin/python', '-c'] and argv[3:] == ['/opt/proxy.py', '3.10', 'vllm.logger']
    ran = fake(monkeypatch, {})
    failed, res = run_module(M, dict(host='p1'))
    assert not failed and 'proxy_python' not in res and ran == []


def test_the_reads_that_start_a_python_run_side_by_side(run_module, monkeypatch):
    """The release read waits until the proxy_python probe has started, and the probe until the unit read has ended:
    one after the other, the release read would time out and come back as an error."""
    probe_started, units_done = threading.Event(), threading.Event()
    release = json.dumps({'python': '/usr/bin/python3', 'vllm-ascend': '0.23.0', 'vllm': '0.23.0'})

    def run_command(self, argv, **_kwargs):
        if argv[0] == 'sh':
            return (0, release, '') if probe_started.wait(5) else (1, '', 'the probe never started')
        if argv[0] == '/opt/proxy/bin/python':
            probe_started.set()
            return (0, '{"python": "3.11.2", "problems": []}', '') if units_done.wait(5) else (1, '', 'no unit read')
        if argv[:2] == ['systemctl', 'list-units']:
            units_done.set()
            return 0, UNITS, ''
        return 0, ADDR, ''

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    failed, res = run_module(M, dict(host='p1', host_facts=True, engines=[dict(kind='prefill')],
                                     proxy=dict(python='/opt/proxy/bin/python')))
    assert not failed and res['release']['prefill']['vllm_ascend'] == '0.23.0'
    assert res['proxy_python'] == dict(python='3.11.2', problems=[])


def test_the_front_binary_is_found_only_when_this_host_can_run_it(run_module, monkeypatch, tmp_path):
    fake(monkeypatch, {'/opt/proxy/bin/python': (0, '{"python": "3.11.2", "problems": []}', '')})
    exe = tmp_path / 'haproxy'
    exe.write_text('#!/bin/sh\n')
    exe.chmod(0o755)

    def front(binary):
        failed, res = run_module(M, dict(host='p1', proxy=dict(python='/opt/proxy/bin/python', front_binary=binary)))
        assert not failed
        return res.get('proxy_front')

    assert front(str(exe)) == dict(binary=str(exe), found=True)
    exe.chmod(0o644)
    assert front(str(exe))['found'] is False
    assert front(str(tmp_path / 'missing'))['found'] is False
    assert front('') is None
