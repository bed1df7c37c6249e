# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container runtime as the roles write it: the unit's ExecStart/ExecStop, the env file passed
with --env-file, and the whole-inventory validation (rendered by ansible-playbook, nothing runs)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import shlex
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# tests/unit/conftest.py puts a root holding ansible_collections/vllm_pd/ascend on sys.path
COLLECTIONS_ROOT = next(p for p in sys.path if os.path.isdir(os.path.join(p, 'ansible_collections', 'vllm_pd', 'ascend')))
ENGINE = dict(engine_kind='prefill', engine_name='prefill', engine_unit='vllm-pd-prefill.service', engine_cluster='c1',
              engine_address={'address': '10.0.30.10', 'interface': 'ens1f0'}, engine_kv_role='kv_producer',
              engine_kv_port=30000, engine_model='/data/models/m', engine_api_port=8100, engine_tp_size=2,
              engine_dp_size=1, engine_dp_args=[], engine_dp_rpc_port=12342, engine_extra_args=[], engine_vllm_binary='vllm', engine_devices=['4', '5'],
              engine_abort_request_timeout=480, engine_env={'EXTRA': 'x'},
              engine_container_image='quay.example/ascend/vllm-ascend:v1', engine_container_engine='docker',
              engine_container_run_options=['--volume=/data/models:/data/models:ro', '--shm-size=16g'],
              # as install.yml finds them: davinci9 exists but is not one of this engine's NPUs
              __engine_present_paths=['/dev/davinci4', '/dev/davinci5', '/dev/davinci9', '/dev/davinci_manager',
                                      '/usr/local/dcmi', '/etc/ascend_install.info'])
COMMON = dict(vllm_pd_model='/data/models/m', vllm_pd_kv_port=30000, vllm_pd_prefill_tp_size=2,
              vllm_pd_decode_tp_size=2, vllm_pd_network='10.0.30.0/24', vllm_pd_cluster='c1',
              vllm_pd_proxy_enabled=False)


def render(tmp_path, hostvars):
    inv = dict(all=dict(
        # render.yml's play connects locally; ansible_connection=local on both would make them one machine
        hosts=dict((h, dict(v, ansible_python_interpreter=sys.executable))
                   for h, v in hostvars.items()),
        children=dict(vllm_pd_prefill=dict(hosts=dict((h, {}) for h in hostvars if h.startswith('p'))),
                      vllm_pd_decode=dict(hosts=dict((h, {}) for h in hostvars if h.startswith('d'))))))
    (tmp_path / 'inv.json').write_text(json.dumps(inv))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_ROOT, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, 'ansible.cfg'))
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i',
                        str(tmp_path / 'inv.json'), os.path.join(HERE, 'render.yml'), '-e', 'out=%s' % tmp_path],
                       capture_output=True, text=True, cwd=REPO_ROOT, env=env, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    return json.loads((tmp_path / 'errors.json').read_text())


def unit_lines(path, key):
    return [line[len(key) + 1:] for line in path.read_text().splitlines() if line.startswith(key + '=')]


def test_container_unit_and_env(tmp_path):
    errors = render(tmp_path, {'p1': dict(COMMON, render=True, engine_runtime='container', **ENGINE),
                               'd1': dict(COMMON)})
    assert errors == []
    unit = tmp_path / 'p1-vllm-pd.service'
    argv = shlex.split(unit_lines(unit, 'ExecStart')[0])
    image = argv.index('quay.example/ascend/vllm-ascend:v1')
    assert argv[:image] == [
        'docker', 'run', '--rm', '--name', 'vllm-pd-prefill', '--net=host', '--env-file', '/etc/vllm-pd/prefill.env',
        '--device=/dev/davinci4', '--device=/dev/davinci5', '--device=/dev/davinci_manager',
        '--volume=/usr/local/dcmi:/usr/local/dcmi:ro', '--volume=/etc/ascend_install.info:/etc/ascend_install.info:ro',
        '--volume=/data/models:/data/models:ro', '--shm-size=16g']
    serve = argv[image + 1:]
    assert serve[:3] == ['vllm', 'serve', '/data/models/m'] and serve[serve.index('--host') + 1] == '10.0.30.10'
    assert json.loads(serve[serve.index('--kv-transfer-config') + 1])['kv_port'] == 30000
    # a leftover container of this unit first, then the start guard (issue 13)
    assert unit_lines(unit, 'ExecStartPre') == ['-docker rm -f vllm-pd-prefill',
                                                '/usr/bin/python3 -I /usr/local/libexec/vllm-pd/start-guard /etc/vllm-pd/prefill.guard.json']
    assert unit_lines(unit, 'Restart') == ['on-failure'] and unit_lines(unit, 'StartLimitBurst') == ['5']
    assert unit_lines(unit, 'ExecStop') == ['-docker stop -t 20 vllm-pd-prefill']
    assert unit_lines(unit, 'ExecStopPost') == ['-docker rm -f vllm-pd-prefill']
    env = (tmp_path / 'p1-vllm-pd.env').read_text()
    assert 'VLLM_HOST_IP=10.0.30.10\n' in env and 'HCCL_IF_IP=10.0.30.10\n' in env
    assert 'GLOO_SOCKET_IFNAME=ens1f0\n' in env and 'EXTRA=x\n' in env
    # the container sees only its NPUs: re-selecting them by id would be wrong
    assert 'ASCEND_RT_VISIBLE_DEVICES' not in [line.split('=')[0] for line in env.splitlines()]


def test_systemd_unit_unchanged(tmp_path):
    render(tmp_path, {'p1': dict(COMMON, render=True, **dict(ENGINE, engine_runtime='systemd')), 'd1': dict(COMMON)})
    unit = tmp_path / 'p1-vllm-pd.service'
    assert shlex.split(unit_lines(unit, 'ExecStart')[0])[:2] == ['vllm', 'serve']
    assert unit_lines(unit, 'ExecStop') == [] and 'docker' not in unit.read_text()
    assert 'ASCEND_RT_VISIBLE_DEVICES=4,5\n' in (tmp_path / 'p1-vllm-pd.env').read_text()


@pytest.mark.parametrize('hostvars, expected', [
    ({'p1': dict(COMMON, vllm_pd_runtime='container'), 'd1': dict(COMMON)},
     'cluster c1, host p1: vllm_pd_runtime is container but vllm_pd_container_image is not set. '
     'Fix: set vllm_pd_container_image'),
    ({'p1': dict(COMMON), 'd1': dict(COMMON, decode_runtime='container', vllm_pd_container_image='i',
                                     decode_container_image='')},
     'cluster c1, host d1: decode_runtime is container but decode_container_image is not set'),
    ({'p1': dict(COMMON, vllm_pd_runtime='k8s'), 'd1': dict(COMMON)},
     'cluster c1, host p1: vllm_pd_runtime=k8s is not one of systemd, container'),
    ({'p1': dict(COMMON, vllm_pd_runtime='container', vllm_pd_container_image='i', vllm_pd_container_engine='nerdctl'),
      'd1': dict(COMMON)},
     'cluster c1, host p1: vllm_pd_container_engine=nerdctl is not one of podman, docker'),
    ({'p1': dict(COMMON), 'd1': dict(COMMON, vllm_pd_runtime='container', vllm_pd_container_image='i',
                                     vllm_pd_container_run_options='--shm-size=1g')},
     'cluster c1, host d1: vllm_pd_container_run_options must be a list'),
])
def test_inventory_errors_of_the_container_runtime(tmp_path, hostvars, expected):
    errors = render(tmp_path, hostvars)
    assert any(e['text'].startswith(expected) for e in errors), errors
    assert all(e['cluster'] == 'c1' for e in errors)


def test_guard_checks_the_ports_of_the_plan_for_a_dense_instance(tmp_path):
    """A dense model's second DP instance has a kv_port of its own and vLLM's rank reset: the guard's group
    starts at that kv_port (port_rank_start 0), not kv_port + dp_rank_start * tp."""
    plan = {'prefill': [{'name': 'prefill-dp1', 'kv_port': 30002, 'dp_rank_start': 1, 'port_rank_start': 0,
                         'dp_size_local': 1}], 'decode': []}
    engine = dict(ENGINE, engine_name='prefill-dp1', engine_kv_port=30002)
    render(tmp_path, {'p1': dict(COMMON, render_guard=True, vllm_pd_instances=plan, **engine), 'd1': dict(COMMON)})
    group = json.loads((tmp_path / 'p1-guard-group.json').read_text())
    assert group == {'kv_port': 30002, 'tp_size': 2, 'pp_size': 1, 'pcp_size': 1, 'dp_rank_start': 0, 'dp_size_local': 1}


def test_pipeline_parallel_reaches_the_command_the_extra_config_and_the_guard(tmp_path):
    """P's pipeline size from its plan: --pipeline-parallel-size when only the variable gives it, prefill.pp_size in
    the kv_connector_extra_config of P and D, the user's own keys kept (recursive merge), and the guard's group."""
    inst = {'name': 'prefill', 'kv_port': 30000, 'dp_rank_start': 1, 'port_rank_start': 1, 'dp_size_local': 1,
            'dp_size': 2, 'tp': 2, 'pp': 2, 'pcp': 1, 'parallel_args': ['--pipeline-parallel-size', '2']}
    user = {'vllm_pd_kv_connector_extra': {'prefill': {'pp_layer_partition': '15,17'}, 'other': 1},
            'vllm_pd_prefill_pp_size': 2}
    engine = dict(ENGINE, engine_parallel_args=inst['parallel_args'])
    for e in ('engine_container_image', 'engine_container_engine', 'engine_container_run_options'):
        engine.pop(e)
    render(tmp_path, {'p1': dict(COMMON, render=True, render_guard=True, engine_runtime='systemd',
                                 vllm_pd_instances={'prefill': [inst], 'decode': []}, **dict(engine, **user)),
                      'd1': dict(COMMON, **user)})
    argv = shlex.split(unit_lines(tmp_path / 'p1-vllm-pd.service', 'ExecStart')[0])
    assert argv[argv.index('--pipeline-parallel-size') + 1] == '2'
    extra = json.loads(argv[argv.index('--kv-transfer-config') + 1])['kv_connector_extra_config']
    assert extra['prefill'] == {'tp_size': 2, 'dp_size': 2, 'pp_size': 2, 'pp_layer_partition': '15,17'}
    assert extra['decode'] == {'tp_size': 2, 'dp_size': 1} and extra['other'] == 1
    group = json.loads((tmp_path / 'p1-guard-group.json').read_text())
    assert group == {'kv_port': 30000, 'tp_size': 2, 'pp_size': 2, 'pcp_size': 1, 'dp_rank_start': 1, 'dp_size_local': 1}


@pytest.mark.parametrize('version, names', [
    ('v0.13.0', ['VLLM_NIXL_ABORT_REQUEST_TIMEOUT']),  # older releases read the NIXL name (#7140)
    ('v0.23.0', ['VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT']),
    ('', ['VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT', 'VLLM_NIXL_ABORT_REQUEST_TIMEOUT']),  # release not given
])
def test_env_file_sets_the_abort_timeout_the_release_reads(tmp_path, version, names):
    render(tmp_path, {'p1': dict(COMMON, render=True, **dict(ENGINE, engine_runtime='systemd', engine_abort_request_timeout=90,
                                                             engine_vllm_ascend_version=version)), 'd1': dict(COMMON)})
    env = (tmp_path / 'p1-vllm-pd.env').read_text().splitlines()
    assert sorted(line for line in env if 'ABORT_REQUEST_TIMEOUT' in line.split('=')[0]) == ['%s=90' % n for n in names]


def test_a_release_that_is_no_version_is_an_inventory_error(tmp_path):
    errors = render(tmp_path, {'p1': dict(COMMON, vllm_pd_vllm_ascend_version='latest'), 'd1': dict(COMMON)})
    assert [e['text'] for e in errors] == [
        'cluster c1, host p1: vllm_pd_vllm_ascend_version=latest is not a vllm-ascend release. '
        'Fix: write it as the release tag, e.g. v0.23.0 or v0.18.0rc1']


@pytest.mark.parametrize('runtime, help_key, has_option, timeout, flag, stop_sec, stop_t', [
    # the installed release lists --shutdown-timeout: passed, and systemd / docker wait that long first
    ('container', 'docker run --rm --net=none quay.example/ascend/vllm-ascend:v1 vllm serve', True, 45, ['45'], '75', '65'),
    ('systemd', 'vllm serve', True, 60, ['60'], '90', None),
    # a release without it would refuse the unknown option: nothing passed, the stop timeouts as before
    ('container', 'docker run --rm --net=none quay.example/ascend/vllm-ascend:v1 vllm serve', False, 45, [], '30', '20'),
    # turned off: nothing passed, whatever the release has
    ('systemd', 'vllm serve', True, 0, [], '30', None),
])
def test_shutdown_timeout_only_where_the_release_has_it(tmp_path, runtime, help_key, has_option, timeout, flag,
                                                        stop_sec, stop_t):
    engine = dict(ENGINE, engine_runtime=runtime, engine_shutdown_timeout=timeout, engine_extra_args=['--enforce-eager'],
                  __engine_serve_options={help_key: has_option})
    render(tmp_path, {'p1': dict(COMMON, render=True, **engine), 'd1': dict(COMMON)})
    unit = tmp_path / 'p1-vllm-pd.service'
    argv = shlex.split(unit_lines(unit, 'ExecStart')[0])
    values = [argv[i + 1] for i, word in enumerate(argv) if word == '--shutdown-timeout']
    assert values == flag
    if flag:  # with the typed settings, before the operator's extra args
        assert argv.index('--shutdown-timeout') < argv.index('--enforce-eager')
    assert unit_lines(unit, 'TimeoutStopSec') == [stop_sec]
    # graceful: SIGTERM to the API server alone, which ends its engine processes itself
    assert unit_lines(unit, 'KillMode') == ['mixed' if flag else 'control-group']
    if stop_t:
        assert unit_lines(unit, 'ExecStop') == ['-docker stop -t %s vllm-pd-prefill' % stop_t]


@pytest.mark.parametrize('installed, serve_options, help_needed, flag', [
    # a supported release next to its vLLM, as read in the engine's Python: the release table answers, no help read
    ({'vllm_ascend': '0.23.0.post1', 'vllm': '0.23.0'}, None, False, ['60']),
    ({'vllm_ascend': '0.18.0', 'vllm': '0.18.0'}, None, False, ['60']),
    # the table answers before a help read of an earlier run would: it is not read
    ({'vllm_ascend': '0.18.0', 'vllm': '0.18.0'}, {'vllm serve': False}, False, ['60']),
    # a release the table cannot answer for (refused, unknown, beside another vLLM, not read): the help is read
    # once per host and binary, and what it lists decides
    ({'vllm_ascend': '0.13.0', 'vllm': '0.13.0'}, None, True, []),
    ({'vllm_ascend': '0.13.0', 'vllm': '0.13.0'}, {'vllm serve': False}, False, []),
    ({'vllm_ascend': '0.99.0', 'vllm': '0.99.0'}, {'vllm serve': True}, False, ['60']),
    ({'vllm_ascend': '0.18.0', 'vllm': '0.17.1'}, None, True, []),
    ({'vllm_ascend': None, 'vllm': None, 'error': 'rc 127'}, {'vllm serve': True}, False, ['60']),
])
def test_shutdown_timeout_from_the_release_table_or_the_help(tmp_path, installed, serve_options, help_needed, flag):
    engine = dict(ENGINE, engine_runtime='systemd', engine_shutdown_timeout=60, vllm_pd_release={'prefill': installed})
    if serve_options is not None:
        engine['__engine_serve_options'] = serve_options
    render(tmp_path, {'p1': dict(COMMON, render=True, **engine), 'd1': dict(COMMON)})
    argv = shlex.split(unit_lines(tmp_path / 'p1-vllm-pd.service', 'ExecStart')[0])
    assert [argv[i + 1] for i, word in enumerate(argv) if word == '--shutdown-timeout'] == flag
    assert json.loads((tmp_path / 'p1-shutdown.json').read_text()) == {'help_needed': help_needed, 'has': bool(flag)}
