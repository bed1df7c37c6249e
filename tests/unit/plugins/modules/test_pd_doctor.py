# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drive pd_doctor's main() against real processes and sockets started by the tests (systemd and
journald are replaced: the 'engine unit' is a child process of the test)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import socket

import pytest

from ansible_collections.vllm_pd.ascend.plugins.modules import pd_doctor as M

HOST = '127.0.0.2'
UNIT = 'vllm-pd-prefill.service'


@pytest.fixture
def fake_systemd(monkeypatch):
    """Units as {unit: show-dict}; journal lines per unit."""
    state = dict(show={}, journal={})

    def unit_show(self, unit):
        return state['show'].get(unit, dict(LoadState='not-found', ActiveState='inactive'))

    def journal(self, unit, invocation, lines):
        return list(state['journal'].get(unit, [])), None
    monkeypatch.setattr(M.Host, 'unit_show', unit_show)
    monkeypatch.setattr(M.Host, 'journal', journal)
    return state


def prefill(ports, **kw):
    e = dict(kind='prefill', unit=UNIT, kv_port=ports[0], tp_size=len(ports))
    e.update(kw)
    return e


def test_inspect_reads_env_group_owner_and_logs(run_module, free_group, spawn_listener, fake_systemd, monkeypatch,
                                                tmp_path):
    ports = free_group()
    monkeypatch.setenv('VLLM_HOST_IP', HOST)
    engine = spawn_listener(HOST, ports)         # inherits VLLM_HOST_IP, like the unit's process
    monkeypatch.delenv('VLLM_HOST_IP')
    env_file = tmp_path / 'prefill.env'
    env_file.write_text('# managed\nVLLM_HOST_IP=%s\n' % HOST)
    fake_systemd['show'][UNIT] = dict(ActiveState='active', SubState='running', MainPID=str(engine.pid))
    fake_systemd['journal'][UNIT] = ['2026-12-02T14:00:00+0000 h vllm[1]: ERROR Force freed expired request: r1.']
    failed, res = run_module(M, dict(mode='inspect', address=HOST, ping=False, npu_count=8,
                                     engines=[prefill(ports, env_file=str(env_file))]))
    assert not failed, res
    e = res['engines'][0]
    assert e['pid'] == engine.pid and e['env']['VLLM_HOST_IP'] == HOST and e['env_file'] == {'VLLM_HOST_IP': HOST}
    g = e['group']
    assert sorted(h['port'] for h in g['ok']) == ports and g['closed'] == [] and g['foreign'] == []
    assert g['engine_addresses'] == [HOST] and g['windows'] == []
    assert e['advertised'] == dict(address=HOST, source='VLLM_HOST_IP of pid %d' % engine.pid)
    assert [h['check'] for h in e['logs']] == ['LogForceFreed']
    assert any(a['address'] == '127.0.0.1' for a in res['host']['addresses'])


def test_inspect_names_a_foreign_holder_and_a_misleading_one(run_module, free_group, spawn_listener, fake_systemd):
    ports = free_group()
    engine = spawn_listener(HOST, ports[:3] + ports[4:])
    other = spawn_listener(HOST, ports[3])          # on the group's address: blocks the engine
    curl = spawn_listener('127.0.0.3', ports[5])    # elsewhere: only answers curl
    fake_systemd['show'][UNIT] = dict(ActiveState='active', MainPID=str(engine.pid))
    client = socket.create_connection((HOST, ports[3]))    # a curl to the foreign holder: no second finding
    try:
        failed, res = run_module(M, dict(mode='inspect', address=HOST, ping=False, npu_count=8,
                                         engines=[prefill(ports)]))
    finally:
        client.close()
    assert not failed, res
    g = res['engines'][0]['group']
    assert [(h['port'], h['pid']) for h in g['foreign']] == [(ports[3], other.pid)] and g['blocking'] == []
    assert [(h['port'], h['pid']) for h in g['misleading']] == [(ports[5], curl.pid)]
    # without VLLM_HOST_IP in its environment, D would dial what the engine bound
    assert res['engines'][0]['advertised']['address'] == HOST


def test_inspect_engine_down_and_reserved_window(run_module, spawn_listener, fake_systemd, tmp_path):
    env_file = tmp_path / 'prefill.env'
    env_file.write_text('VLLM_HOST_IP=%s\n' % HOST)
    fake_systemd['show'][UNIT] = dict(ActiveState='failed', SubState='failed', MainPID='0', Result='exit-code')
    fake_systemd['journal'][UNIT] = ['l%d' % i for i in range(20)]
    failed, res = run_module(M, dict(mode='inspect', address=HOST, ping=False, npu_count=8,
                                     engines=[prefill(list(range(20002, 20010)), env_file=str(env_file))]))
    assert not failed, res
    e = res['engines'][0]
    assert e['pid'] is None and e['env'] is None and e['tail'] == ['l%d' % i for i in range(12, 20)]
    assert e['advertised']['address'] == HOST and 'engine not running' in e['advertised']['source']
    assert 'AdxlWindow' in [w['check'] for w in e['group']['windows']]


def test_probe_reports_each_port(run_module, free_group, spawn_listener):
    ports = free_group(2)
    spawn_listener(HOST, ports[0])           # plain TCP: accepts, never greets
    failed, res = run_module(M, dict(mode='probe', probe_timeout=0.3,
                                     targets=[dict(host='p1', address=HOST, ports=ports, what='advertised')]))
    assert not failed, res
    t = res['targets'][0]
    assert [r['result'] for r in t['probes']] == ['silent', 'refused']
    assert t['route']['type'] == 'local'


def test_diagnose_returns_findings_summary_and_html(run_module):
    hosts = dict(p1=dict(cluster='c1', groups=['prefill'], unreachable='ssh: no route'),
                 d1=dict(cluster='c1', groups=['decode'], unreachable='ssh: no route'))
    failed, res = run_module(M, dict(mode='diagnose', hosts=hosts, title='t'))
    assert not failed and not res['changed']
    assert res['clusters'][0]['root_cause']['check'] == 'HostUnreachable'
    assert res['summary'][0].startswith('cluster c1: FAILING') and '<svg' in res['html']


def test_inspect_prefill_needs_the_address(run_module):
    failed, res = run_module(M, dict(mode='inspect', engines=[prefill([28002])]))
    assert failed and 'needs address' in res['msg']


def test_inspect_engine_in_a_container(run_module, free_group, spawn_listener, fake_systemd, monkeypatch):
    """Container runtime: the unit's MainPID is the podman client; the listener is the container's process."""
    ports = free_group()
    client = spawn_listener('127.0.0.3', free_group(1))      # "podman run", VLLM_HOST_IP not in its environment
    monkeypatch.setenv('VLLM_HOST_IP', HOST)
    engine = spawn_listener(HOST, ports)                     # the container's init process (--env-file)
    monkeypatch.delenv('VLLM_HOST_IP')
    fake_systemd['show'][UNIT] = dict(ActiveState='active', SubState='running', MainPID=str(client.pid))
    asked = []

    def container(self, engine_name, name):
        asked.append((engine_name, name))
        return dict(id='c' * 64, pid=engine.pid, name=name)
    monkeypatch.setattr(M.Host, 'container', container)
    eng = prefill(ports, container='vllm-pd-prefill', container_engine='docker')
    failed, res = run_module(M, dict(mode='inspect', address=HOST, ping=False, npu_count=8, engines=[eng]))
    assert not failed, res
    e = res['engines'][0]
    assert asked == [('docker', 'vllm-pd-prefill')] and e['container']['pid'] == engine.pid
    assert e['pid'] == engine.pid and e['env']['VLLM_HOST_IP'] == HOST
    assert sorted(h['port'] for h in e['group']['ok']) == ports and e['group']['foreign'] == []
    # the same engine without the container: its ports are held by a process outside the unit
    failed, res = run_module(M, dict(mode='inspect', address=HOST, ping=False, npu_count=8, engines=[prefill(ports)]))
    assert not failed and sorted(h['port'] for h in res['engines'][0]['group']['foreign']) == ports


def test_inspect_checks_both_pipeline_stages_against_the_engines_own_windows(
        run_module, free_group, spawn_listener, fake_systemd, monkeypatch, tmp_path):
    ports = free_group(8)   # tp 4 x pp 2: both stages are the group
    monkeypatch.setenv('HCCL_IF_BASE_PORT', str(ports[6]))   # the engine's own env moves HCCL onto stage 1
    engine = spawn_listener(HOST, ports)
    monkeypatch.delenv('HCCL_IF_BASE_PORT')
    fake_systemd['show'][UNIT] = dict(ActiveState='active', MainPID=str(engine.pid))
    failed, res = run_module(M, dict(mode='inspect', address=HOST, ping=False, npu_count=8,
                                     engines=[prefill(ports, tp_size=4, pp_size=2)]))
    assert not failed, res
    g = res['engines'][0]['group']
    assert g['ports'] == ports and sorted(h['port'] for h in g['ok']) == ports
    [hccl] = [w for w in g['windows'] if w['check'] == 'HcclRange']
    assert hccl['ports'] == ports[6:] and hccl['window'] == [ports[6], ports[6] + 31]
    # stopped: the env file it will start with decides
    env_file = tmp_path / 'prefill.env'
    env_file.write_text('VLLM_HOST_IP=%s\nMC_MIN_RPC_PORT=%d\nMC_MAX_RPC_PORT=%d\n' % (HOST, ports[0], ports[1]))
    fake_systemd['show'][UNIT] = dict(ActiveState='failed', MainPID='0')
    failed, res = run_module(M, dict(mode='inspect', address=HOST, ping=False, npu_count=8,
                                     engines=[prefill(ports, tp_size=4, pp_size=2, env_file=str(env_file))]))
    assert [w['ports'] for w in res['engines'][0]['group']['windows'] if w['check'] == 'TeRpcRange'] == [ports[:2]]
