# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The proxy tier's HAProxy configuration (common/proxy_front.front_config): what it promises, read from the text."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import re

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front as F
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases

HEALTH = releases.runtime('0.23.0.post1')['proxy_health_route']


def config(**kw):
    args = dict(address='10.0.0.5', port=8000, base_port=18001, processes=2, health_route=HEALTH, cluster='a')
    args.update(kw)
    return F.front_config(**args)


def section(text, name):
    """The lines of one section (global, defaults, frontend X, backend X), stripped."""
    out, inside = [], False
    for line in text.splitlines():
        if line and not line.startswith((' ', '#')):
            inside = line == name
            continue
        if inside and line.strip():
            out.append(line.strip())
    return out


def seconds(value):
    m = re.match(r'^(\d+)(ms|s|m|h)?$', value)
    n, unit = int(m.group(1)), m.group(2) or 'ms'
    return n * {'ms': 0.001, 's': 1, 'm': 60, 'h': 3600}[unit]


def test_it_listens_on_the_proxy_port_and_balances_leastconn_over_the_loopback_processes():
    text = config(processes=3)
    assert 'bind 10.0.0.5:8000' in section(text, 'frontend front')
    backend = section(text, 'backend ' + F.BACKEND)
    assert 'balance leastconn' in backend
    assert [l for l in backend if l.startswith('server ')] == [
        'server proxy1 127.0.0.1:18001', 'server proxy2 127.0.0.1:18002', 'server proxy3 127.0.0.1:18003']
    assert F.process_units(3) == ['vllm-pd-proxy@1.service', 'vllm-pd-proxy@2.service', 'vllm-pd-proxy@3.service']


def test_each_process_is_checked_on_the_release_health_route_and_taken_out_within_2_s():
    backend = section(config(), 'backend ' + F.BACKEND)
    assert 'option httpchk GET %s' % HEALTH in backend
    [default] = [l for l in backend if l.startswith('default-server ')]
    words = default.split()
    assert 'check' in words and 'observe' in words and words[words.index('on-error') + 1] == 'mark-down'
    # a dead process fails its next check (at most inter) and then fall - 1 fast checks
    inter, fast, fall = (seconds(words[words.index(k) + 1]) for k in ('inter', 'fastinter', 'fall'))
    assert inter + (int(fall) - 1) * fast <= 2


def test_a_ten_minute_generation_is_never_cut():
    defaults = section(config(), 'defaults')
    timeouts = dict(l.split()[1:3] for l in defaults if l.startswith('timeout '))
    for name in ('client', 'server', 'tunnel'):
        assert seconds(timeouts[name]) > 600, name


def test_a_request_a_process_accepted_is_never_sent_again():
    defaults = section(config(), 'defaults')
    # only a connection that failed (the request never reached a process) is retried, on another process
    retry_on = [l for l in defaults if l.startswith('retry-on ')]
    assert retry_on == ['retry-on conn-failure']
    assert not any(l.startswith(('option redispatch',)) and l.split()[-1] not in ('1', 'redispatch') for l in defaults)
    assert 'option http-server-close' in defaults


def test_the_runtime_api_is_an_admin_socket_on_a_local_path():
    glob = section(config(), 'global')
    assert 'stats socket %s mode 600 level admin' % F.ADMIN_SOCKET in glob
    assert F.ADMIN_SOCKET.startswith('/run/') and F.FRONT_CONFIG.startswith('/etc/vllm-pd/')


def test_it_never_uses_the_distribution_haproxy_names():
    assert F.FRONT_UNIT != 'haproxy.service' and not F.FRONT_CONFIG.startswith('/etc/haproxy')


@pytest.mark.parametrize('kw', [dict(processes=0), dict(health_route='healthcheck')])
def test_a_bad_argument_is_refused(kw):
    with pytest.raises(ValueError):
        config(**kw)


def test_each_process_gets_its_port_file_and_its_start_guard():
    second = F.processes_plan(18001, 2)[1]
    assert (second['index'], second['unit'], second['port'], second['env_file']) == (
        2, 'vllm-pd-proxy@2.service', 18002, '/etc/vllm-pd/proxy@2.env')
    env, guard = second['files']
    assert env == dict(path='/etc/vllm-pd/proxy@2.env', content='PD_PROXY_PORT=18002\n', mode='0644')
    assert guard['path'] == '/etc/vllm-pd/proxy@2.guard.json' and guard['content'].endswith('}\n')
    # what the start guard reads (the keys the engine role's guard entry point writes)
    assert json.loads(guard['content']) == dict(unit='vllm-pd-proxy@2.service', host_ip='127.0.0.1', address_wait=0,
                                                ports=[dict(port=18002, what='proxy process')])


def test_haproxys_prometheus_exporter_listens_on_its_own_port_only_when_asked():
    text = config(metrics_port=8405)
    assert section(text, 'frontend metrics') == [
        'bind 10.0.0.5:8405', 'no log', 'http-request use-service prometheus-exporter if { path %s }' % F.METRICS_PATH]
    assert 'frontend metrics' not in config() and 'frontend metrics' not in config(metrics_port=0)


@pytest.mark.parametrize('hostvars, expected', [
    ({}, ('vllm_pd_proxy_front_metrics_port', F.DEFAULT_METRICS_PORT, None)),                       # no tier
    ({'vllm_pd_proxy_front': 'haproxy'}, ('vllm_pd_proxy_front_metrics_port', F.DEFAULT_METRICS_PORT, F.DEFAULT_METRICS_PORT)),
    ({'vllm_pd_proxy_front': 'haproxy', 'vllm_pd_proxy_front_metrics_port': '9100'},
     ('vllm_pd_proxy_front_metrics_port', '9100', 9100)),
    # the role variable wins, for the front as for the port
    ({'vllm_pd_proxy_front': 'none', 'proxy_front': 'haproxy', 'vllm_pd_proxy_front_metrics_port': 9100,
      'proxy_front_metrics_port': 0}, ('proxy_front_metrics_port', 0, 0)),
    ({'proxy_front': 'none', 'vllm_pd_proxy_front': 'haproxy'}, ('vllm_pd_proxy_front_metrics_port', F.DEFAULT_METRICS_PORT, None)),
    # no port: None (the inventory check names it)
    ({'vllm_pd_proxy_front': 'haproxy', 'vllm_pd_proxy_front_metrics_port': 70000}, ('vllm_pd_proxy_front_metrics_port', 70000, None)),
    ({'vllm_pd_proxy_front': 'haproxy', 'vllm_pd_proxy_front_metrics_port': True}, ('vllm_pd_proxy_front_metrics_port', True, None)),
    ({'vllm_pd_proxy_front': 'haproxy', 'vllm_pd_proxy_front_metrics_port': -1}, ('vllm_pd_proxy_front_metrics_port', -1, None)),
    ({'vllm_pd_proxy_front': 'haproxy', 'vllm_pd_proxy_front_metrics_port': '84o5'}, ('vllm_pd_proxy_front_metrics_port', '84o5', None)),
])
def test_the_exporter_port_is_read_one_way_for_every_reader(hostvars, expected):
    assert F.metrics_port(hostvars) == expected


def test_the_roles_default_exporter_port_is_the_module_utils_one():
    """The proxy role's default and its argument spec say the port metrics_port falls back to."""
    import os
    import yaml
    root = os.path.join(os.path.dirname(__file__), *(['..'] * 5))
    with open(os.path.join(root, 'roles', 'proxy', 'defaults', 'main.yml'), encoding='utf-8') as f:
        default = yaml.safe_load(f)['proxy_front_metrics_port']
    with open(os.path.join(root, 'roles', 'proxy', 'meta', 'argument_specs.yml'), encoding='utf-8') as f:
        spec = yaml.safe_load(f)['argument_specs']['main']['options']['proxy_front_metrics_port']
    assert default == '{{ vllm_pd_proxy_front_metrics_port | default(%d) }}' % F.DEFAULT_METRICS_PORT
    assert spec['default'] == F.DEFAULT_METRICS_PORT
