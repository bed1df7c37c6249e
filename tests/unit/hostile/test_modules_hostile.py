# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile parameter values for the modules: each row is a named error that names the parameter (from the
module's fail_json, never a traceback) or a proven-safe outcome. The modules' real main() runs with
AnsibleModule's exit/fail patched (conftest run_module); any other exception fails the row."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import zmtp
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_free import check_free
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.params import ParamError
from ansible_collections.vllm_pd.ascend.plugins.modules import kv_port_group as KPG
from ansible_collections.vllm_pd.ascend.plugins.modules import mooncake_residue as RES
from ansible_collections.vllm_pd.ascend.plugins.modules import pd_doctor as DOC

IP = '127.0.0.1'


def kpg(**kw):
    a = dict(kv_port=28002, tp_size=8, host_ip=IP, npu_count=8, state='free')
    a.update(kw)
    return a


# (id, module, args, parameter the message must name, further text in the message)
MODULE_ERRORS = [
    ('group-past-65535-tp8', KPG, kpg(kv_port=65530), 'kv_port=65530', 'past 65535'),
    ('group-past-65535-dp', KPG, kpg(kv_port=65000, dp_rank_start=1, dp_size_local=100), 'kv_port=65000', '65535'),
    ('kv-port-70000', KPG, kpg(kv_port=70000, tp_size=1), 'kv_port=70000', '65535'),
    ('kv-port-negative', KPG, kpg(kv_port=-5), 'kv_port=-5', 'between 1 and 65535'),
    ('kv-port-zero', KPG, kpg(kv_port=0), 'kv_port=0', 'between 1 and 65535'),
    ('tp-zero', KPG, kpg(tp_size=0), 'tp_size=0', '>= 1'),
    ('tp-negative', KPG, kpg(tp_size=-8), 'tp_size=-8', '>= 1'),
    ('pp-zero', KPG, kpg(pp_size=0), 'pp_size=0', '>= 1'),
    ('dp-rank-negative', KPG, kpg(dp_rank_start=-1), 'dp_rank_start=-1', '>= 0'),
    ('dp-size-huge', KPG, kpg(dp_size_local=10 ** 12), 'dp_size_local', '65535'),
    ('npu-count-zero', KPG, kpg(npu_count=0), 'npu_count=0', 'enabled=false'),
    ('npu-count-negative', KPG, kpg(npu_count=-2), 'npu_count=-2', 'enabled=false'),
    ('adxl-reversed', KPG, kpg(adxl_window=dict(start=30000, end=20000)), 'adxl_window', 'enabled: false'),
    ('adxl-start-70000', KPG, kpg(adxl_window=dict(start=70000)), 'adxl_window.start=70000', '65535'),
    ('ascend-base-negative', KPG, kpg(ascend_base_port=-1), 'ascend_base_port=-1', '65535'),
    ('te-range-reversed', KPG, kpg(te_rpc_range=[17000, 15000]), 'te_rpc_range', '[15000, 17000]'),
    ('hccl-range-one', KPG, kpg(hccl_range=[60000]), 'hccl_range', 'two ports'),
    ('hccl-range-past', KPG, kpg(hccl_range=[60000, 99999]), 'hccl_range[1]=99999', '65535'),
    ('extra-reserved-70000', KPG, kpg(extra_reserved=['70000']), 'extra_reserved', '65535'),
    ('extra-reserved-word', KPG, kpg(extra_reserved=['api']), 'extra_reserved', '9000-9010'),
    ('timeout-negative', KPG, kpg(timeout=-1), 'timeout=-1', '>= 0'),
    ('timeout-huge', KPG, kpg(timeout=10 ** 15), 'timeout=', 'at most'),
    ('probe-timeout-nan', KPG, kpg(state='reachable', remote_host=IP, probe_timeout=float('nan')),
     'probe_timeout=nan', 'finite'),
    ('probe-timeout-inf', KPG, kpg(state='reachable', remote_host=IP, probe_timeout=float('inf')),
     'probe_timeout=inf', 'finite'),
    ('probe-timeout-zero', KPG, kpg(state='reachable', remote_host=IP, probe_timeout=0), 'probe_timeout=0', '> 0'),
    ('probe-timeout-1e300', KPG, kpg(state='reachable', remote_host=IP, probe_timeout=1e300), 'probe_timeout',
     'at most'),
    ('remote-host-name', KPG, kpg(state='reachable', remote_host='pd-p1; rm -rf /'), 'remote_host', 'IP address'),
    ('host-ip-newline', KPG, kpg(host_ip='10.0.0.1\nExecStartPre=/bin/sh'), 'host_ip', 'IP address'),
    ('owner-pid-zero', KPG, kpg(owner_pid=0), 'owner_pid=0', '>= 1'),
    ('owner-unit-option', KPG, kpg(owner_unit='--now'), 'owner_unit', 'systemd unit name'),
    ('stop-service-option', KPG, kpg(stop_services=['-H root@elsewhere']), 'stop_services[0]', 'systemd unit name'),
    ('stop-service-container-bad', KPG, kpg(stop_services=['container:../x']), 'container:../x', 'container name'),
    ('owner-container-slash', KPG, kpg(owner_container='a/b'), 'owner_container', 'container name'),
    ('doctor-probe-port-word', DOC, dict(mode='probe', targets=[dict(address=IP, ports=['abc'])]),
     'targets[0].ports[0]', '65535'),
    ('doctor-probe-port-70000', DOC, dict(mode='probe', targets=[dict(address=IP, ports=[70000])]),
     'targets[0].ports[0]=70000', '65535'),
    ('doctor-probe-timeout-negative', DOC, dict(mode='probe', probe_timeout=-1, targets=[dict(address=IP, ports=[1])]),
     'probe_timeout', '> 0'),
    ('doctor-probe-timeout-nan', DOC, dict(mode='probe', probe_timeout=float('nan'), targets=[]),
     'probe_timeout', 'finite'),
    ('doctor-probe-address-name', DOC, dict(mode='probe', targets=[dict(address='not an ip', ports=[1])]),
     'targets[0].address', 'IP address'),
    ('doctor-probe-ports-not-list', DOC, dict(mode='probe', targets=[dict(address=IP, ports='28002')]),
     'targets[0].ports', 'list'),
    ('doctor-engine-group-past', DOC, dict(mode='inspect', address=IP, engines=[dict(
        kind='prefill', unit='vllm-pd-prefill.service', kv_port=65530, tp_size=8)]), 'engines[0].kv_port', '65535'),
    ('doctor-engine-dp-zero', DOC, dict(mode='inspect', address=IP, engines=[dict(
        kind='prefill', unit='vllm-pd-prefill.service', kv_port=28002, dp_size=0)]), 'engines[0].dp_size', '>= 1'),
    ('doctor-engine-api-port', DOC, dict(mode='inspect', address=IP, engines=[dict(
        kind='decode', unit='vllm-pd-decode.service', api_port=99999)]), 'engines[0].api_port', '65535'),
    ('doctor-proxy-port-word', DOC, dict(mode='inspect', proxy=dict(port='abc')), 'proxy.port', '65535'),
    ('doctor-npu-zero', DOC, dict(mode='inspect', npu_count=0), 'npu_count=0', '>= 1'),
    ('doctor-log-lines-zero', DOC, dict(mode='inspect', log_lines=0), 'log_lines=0', 'between 1'),
    ('doctor-peer-address', DOC, dict(mode='inspect', peers=[dict(host='pd-d1', address='10.0.0.1/24')]),
     'peers[0].address', 'IP address'),
    ('doctor-extra-reserved', DOC, dict(mode='inspect', extra_reserved=['0-70000']), 'extra_reserved', '65535'),
    ('residue-etc-passwd', RES, dict(patterns=['/etc/passwd*']), '/etc/passwd*', 'outside'),
    ('residue-var-lib', RES, dict(patterns=['/var/lib/mooncake*']), '/var/lib/mooncake*', 'outside'),
    ('residue-dotdot', RES, dict(patterns=['/tmp/../etc/shadow*']), '/tmp/../etc/shadow*', '".."'),
    ('residue-relative', RES, dict(patterns=['tmp/mooncake*']), 'tmp/mooncake*', 'not absolute'),
    ('residue-everything', RES, dict(patterns=['/tmp/*']), '/tmp/*', 'literal part'),
    ('residue-glob-dir', RES, dict(patterns=['/tmp/*/mooncake*']), '/tmp/*/mooncake*', 'wildcards'),
]


@pytest.mark.parametrize('mod, args, name, text', [r[1:] for r in MODULE_ERRORS], ids=[r[0] for r in MODULE_ERRORS])
def test_module_refuses_with_named_error(run_module, mod, args, name, text):
    failed, res = run_module(mod, args)
    assert failed, res
    assert name in res['msg'] and text in res['msg'], res['msg']
    assert not res.get('changed')


def test_group_ending_at_65535_is_accepted_as_arithmetic(run_module, monkeypatch):
    """The last legal group (65528..65535) passes validation; what is wrong with it is a finding, not a crash."""
    monkeypatch.setattr(KPG.HostOps, 'sockets', lambda self, ports: [])
    monkeypatch.setattr(KPG.HostOps, 'bind_probe', lambda self, host_ip, port: None)
    monkeypatch.setattr(KPG.HostOps, 'sysctl_ranges', lambda self: ((32768, 60999), []))
    failed, res = run_module(KPG, kpg(kv_port=65528, _ansible_check_mode=True))
    assert not failed and res['ports'] == list(range(65528, 65536)) and res['findings'] == []


def test_probe_timeout_digits_as_text_are_a_number(run_module):
    failed, res = run_module(DOC, dict(mode='probe', probe_timeout='0.2', targets=[dict(address=IP, ports=['1'])]))
    assert not failed and res['targets'][0]['probes'][0]['result'] in ('refused', 'timeout')


# zmtp: a library, so a bad argument is an 'error' result naming it, never an exception
ZMTP_ROWS = [
    ('port-70000', dict(host=IP, port=70000), 'port=70000'),
    ('port-negative', dict(host=IP, port=-1), 'port=-1'),
    ('port-text', dict(host=IP, port='x'), "port='x'"),
    ('port-none', dict(host=IP, port=None), 'port=None'),
    ('port-float', dict(host=IP, port=28002.5), 'port=28002.5'),
    ('timeout-nan', dict(host=IP, port=1, timeout=float('nan')), 'timeout=nan'),
    ('timeout-negative', dict(host=IP, port=1, timeout=-1), 'timeout=-1'),
    ('timeout-huge', dict(host=IP, port=1, timeout=1e300), 'timeout=1e+300'),
    ('host-none', dict(host=None, port=1), 'host=None'),
    ('host-name', dict(host='localhost\n', port=1), 'host='),
]


@pytest.mark.parametrize('kw, name', [r[1:] for r in ZMTP_ROWS], ids=[r[0] for r in ZMTP_ROWS])
def test_zmtp_probe_bad_argument_is_an_error_result(kw, name):
    res = zmtp.probe(**kw)
    assert res['result'] == 'error' and name in res['detail'], res


def test_zmtp_probe_many_bad_timeout_every_port_errors():
    res = zmtp.probe_many(IP, [1, 2], timeout=float('inf'))
    assert [r['result'] for r in res] == ['error', 'error'] and 'timeout=inf' in res[0]['detail']


# check_free (the start guard's entry): ParamError naming the argument, never struct.error
@pytest.mark.parametrize('kw, name', [
    (dict(kv_port=65530, tp_size=8), 'kv_port=65530'),
    (dict(kv_port=28002, npu_count=0), 'npu_count=0'),
    (dict(kv_port=28002, host_ip='eth0'), 'host_ip'),
    (dict(kv_port=28002, adxl=dict(start=30000, end=29999)), 'adxl_window'),
], ids=['group-past', 'npu-zero', 'host-ip-name', 'adxl-reversed'])
def test_check_free_refuses(kw, name):
    with pytest.raises(ParamError) as e:
        check_free(**kw)
    assert name in str(e.value)


# mooncake_residue and symlinks: nothing outside the allowed directories is ever removed
def test_residue_symlinked_directory_part_is_refused_and_target_kept(run_module, tmp_path):
    outside = tmp_path / 'precious'
    outside.mkdir()
    (outside / 'mooncake_db').write_text('important')
    link = tmp_path / 'scratch'
    os.symlink(str(outside), str(link))
    failed, res = run_module(RES, dict(patterns=[str(link / 'mooncake*')]))
    assert failed and 'symlink' in res['msg'] and str(link) in res['msg']
    assert (outside / 'mooncake_db').read_text() == 'important'


def test_residue_symlink_deeper_in_the_path_is_refused(run_module, tmp_path):
    outside = tmp_path / 'elsewhere'
    (outside / 'sub').mkdir(parents=True)
    (outside / 'sub' / 'mooncake_x').write_text('keep')
    (tmp_path / 'a').mkdir()
    os.symlink(str(outside), str(tmp_path / 'a' / 'b'))
    failed, res = run_module(RES, dict(patterns=[str(tmp_path / 'a' / 'b' / 'sub' / 'mooncake*')]))
    assert failed and 'symlink' in res['msg']
    assert (outside / 'sub' / 'mooncake_x').exists()


def test_residue_matching_symlink_to_a_directory_removes_only_the_link(run_module, tmp_path):
    outside = tmp_path / 'keep'
    outside.mkdir()
    (outside / 'data').write_text('x')
    shm = tmp_path / 'shm'
    shm.mkdir()
    os.symlink(str(outside), str(shm / 'mooncake_dir'))
    failed, res = run_module(RES, dict(patterns=[str(shm / 'mooncake*')]))
    assert not failed and res['removed'] == [str(shm / 'mooncake_dir')]
    assert not os.path.lexists(str(shm / 'mooncake_dir')) and (outside / 'data').exists()


def test_residue_symlink_inside_a_matching_directory_is_not_followed(run_module, tmp_path):
    outside = tmp_path / 'keep2'
    outside.mkdir()
    (outside / 'data').write_text('x')
    d = tmp_path / 'shm2' / 'mooncake_meta'
    d.mkdir(parents=True)
    os.symlink(str(outside), str(d / 'inner'))
    (d / 'f').write_text('y')
    failed, res = run_module(RES, dict(patterns=[str(tmp_path / 'shm2' / 'mooncake*')]))
    assert not failed and not d.exists() and (outside / 'data').read_text() == 'x'


def test_residue_missing_directory_is_nothing_to_do(run_module, tmp_path):
    failed, res = run_module(RES, dict(patterns=[str(tmp_path / 'none' / 'mooncake*')]))
    assert not failed and res['removed'] == [] and not res['changed']
