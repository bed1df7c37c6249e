# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The proxy tier (vllm_pd_proxy_front: haproxy): HAProxy on the proxy port in front of N processes of the
release's proxy on loopback. What it is made of (names, paths, defaults) and the HAProxy configuration, as pure
functions: the proxy role renders front_config()'s text unchanged, the inventory rules read FRONTS and the defaults.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.params import whole_number

# vllm_pd_proxy_front: 'none' keeps one proxy process on the proxy port (its admin API changes members);
# 'haproxy' puts HAProxy there, in front of proxy_front_processes processes of the proxy on 127.0.0.1
FRONTS = ('none', 'haproxy')
DEFAULT_FRONT = 'none'
DEFAULT_PROCESSES = 2
# the most processes a host runs: each holds a connection pool to every member and its own scheduling state
MAX_PROCESSES = 16
# the loopback port of process 1; process K listens on DEFAULT_BASE_PORT + K - 1
DEFAULT_BASE_PORT = 18001
LOOPBACK = '127.0.0.1'
# HAProxy's built-in Prometheus exporter (a service of Debian's haproxy 2.6 build) on the proxy host's address; 0: none
DEFAULT_METRICS_PORT = 8405
METRICS_PATH = '/metrics'
# the variables a proxy host chooses the front and the exporter's port with: the role variable before the vllm_pd_ one
FRONT_CHOICE_VARS = ('proxy_front', 'vllm_pd_proxy_front')
METRICS_PORT_VARS = ('proxy_front_metrics_port', 'vllm_pd_proxy_front_metrics_port')
# the front's own unit and files: never the distribution's haproxy.service nor /etc/haproxy
FRONT_UNIT = 'vllm-pd-front.service'
FRONT_CONFIG = '/etc/vllm-pd/front.cfg'
# RuntimeDirectory= of FRONT_UNIT: systemd makes it (0755 root) at each start
FRONT_RUN_DIR = '/run/vllm-pd-front'
ADMIN_SOCKET = FRONT_RUN_DIR + '/admin.sock'
PROCESS_UNIT = 'vllm-pd-proxy@%d.service'
# what process K reads (the template unit's EnvironmentFile and start guard, %i = K)
PROCESS_ENV = '/etc/vllm-pd/proxy@%d.env'
PROCESS_GUARD = '/etc/vllm-pd/proxy@%d.guard.json'
PORT_VARIABLE = 'PD_PROXY_PORT'
BACKEND = 'proxies'
# HAProxy's name of process K in BACKEND (the runtime API addresses it as BACKEND/SERVER)
SERVER = 'proxy%d'

# Timeouts (seconds). A streamed completion sends its first byte only after prefill, then a chunk per token; a
# non-streamed one sends nothing until the last token. `timeout server` (the proxy process silent) and `timeout
# client` (the client silent) must therefore outlast the longest generation: 10 minutes must never be cut, so
# both are 15 minutes. `timeout tunnel` covers a connection once it is upgraded (never here, but it would
# otherwise fall back to the shorter client/server pair). `timeout http-request` bounds only the request's
# headers, `timeout connect` a loopback connect.
TIMEOUTS = (('connect', 5), ('client', 900), ('server', 900), ('tunnel', 900), ('http-request', 30),
            ('http-keep-alive', 30), ('queue', 30), ('check', 2))
# health checks: every second; 2 failures (or 1 failed connection of real traffic, observe layer4) take a process
# out, 2 passes put it back: a killed process is out within about 2 s
CHECK = dict(inter='1s', fastinter='500ms', downinter='1s', fall=2, rise=2)


def process_ports(base_port, processes):
    """The loopback ports of processes 1..PROCESSES."""
    return [int(base_port) + k for k in range(int(processes))]


def metrics_port(hostvars):
    """(variable, raw value, port) of HAProxy's Prometheus exporter as a proxy host's variables (HOSTVARS, a mapping)
    set it: the role variable before the vllm_pd_ one, DEFAULT_METRICS_PORT when neither is set. Port is the TCP port
    (0: no exporter), or None when the host runs no proxy tier or the value is no port 0-65535. The one reading of it
    for the inventory check, the preflight's port check and the monitoring targets."""
    front = next((hostvars[v] for v in FRONT_CHOICE_VARS if v in hostvars), DEFAULT_FRONT)
    var = next((v for v in METRICS_PORT_VARS if v in hostvars), METRICS_PORT_VARS[-1])
    raw = hostvars.get(var, DEFAULT_METRICS_PORT)
    port = whole_number(raw)
    return var, raw, port if front == 'haproxy' and port is not None and port <= 65535 else None


def process_units(processes):
    return [PROCESS_UNIT % (k + 1) for k in range(int(processes))]


def unit_of_server(server):
    """The unit of the process HAProxy names SERVER (SERVER % K -> PROCESS_UNIT % K), or None for another name."""
    prefix = SERVER.split('%', 1)[0]
    index = server[len(prefix):] if server.startswith(prefix) else ''
    return PROCESS_UNIT % int(index) if index.isdigit() else None


def processes_plan(base_port, processes):
    """Each process of the tier: its index, unit, loopback port, HAProxy's server name, and the two files it reads, its env file (its port)
    and its start guard's configuration (the keys the engine role's guard entry point writes, in to_nice_json's
    form), so the role writes them as they are."""
    out = []
    for k, (unit, port) in enumerate(zip(process_units(processes), process_ports(base_port, processes))):
        guard = dict(unit=unit, host_ip=LOOPBACK, ports=[dict(port=port, what='proxy process')], address_wait=0)
        out.append(dict(index=k + 1, unit=unit, port=port, server=SERVER % (k + 1), env_file=PROCESS_ENV % (k + 1), files=[
            dict(path=PROCESS_ENV % (k + 1), content='%s=%d\n' % (PORT_VARIABLE, port), mode='0644'),
            dict(path=PROCESS_GUARD % (k + 1), mode='0644',
                 content=json.dumps(guard, indent=4, sort_keys=True, separators=(',', ': ')) + '\n')]))
    return out


def front_config(address, port, base_port, processes, health_route, cluster='', socket=ADMIN_SOCKET, metrics_port=0):
    """The text of FRONT_CONFIG: HAProxy on ADDRESS:PORT, balancing leastconn over PROCESSES proxy processes on
    127.0.0.1:BASE_PORT.., each checked with GET HEALTH_ROUTE (the release table's proxy_health_route); with
    METRICS_PORT, its Prometheus exporter on ADDRESS:METRICS_PORT at METRICS_PATH."""
    if not health_route.startswith('/'):
        raise ValueError('health_route must be a path, got %r' % (health_route,))
    if int(processes) < 1:
        raise ValueError('processes must be >= 1, got %r' % (processes,))
    lines = [
        '# vllm_pd.ascend proxy front of cluster %s (plugins/module_utils/common/proxy_front.py); do not edit,' % cluster,
        '# the proxy role rewrites it and validates it with haproxy -c before every (re)load.',
        'global',
        '    log stdout format raw local0 info',
        # the runtime API: drain and ready a process around its restart (pd_front_server), its counts for the doctor
        '    stats socket %s mode 600 level admin' % socket,
        '    stats timeout 30s',
        '',
        'defaults',
        '    mode http',
        '    log global',
        '    option httplog',
        '    option dontlognull',
        # one request per connection to a proxy process: a kept-alive connection the process is closing can take no
        # request, which could then not be resent (it may have been received)
        '    option http-server-close',
        # Never send a request twice: a proxy that received it may have started its prefill. The only retry is of a
        # connection that was refused or timed out (retry-on conn-failure): the request never reached a process, so
        # sending it to another one (redispatch) is no second prefill. A killed process costs only its own requests.
        '    retries 1',
        '    retry-on conn-failure',
        '    option redispatch 1',
    ]
    lines += ['    timeout %s %ds' % (name, seconds) for name, seconds in TIMEOUTS]
    lines += [
        '',
        'frontend front',
        '    bind %s:%d' % (address, int(port)),
        '    default_backend %s' % BACKEND,
        '',
        'backend %s' % BACKEND,
        '    balance leastconn',
        '    option httpchk GET %s' % health_route,
        '    http-check expect status 200',
        '    default-server check %s observe layer4 error-limit 1 on-error mark-down' % ' '.join(
            '%s %s' % (k, CHECK[k]) for k in ('inter', 'fastinter', 'downinter', 'fall', 'rise')),
    ]
    lines += ['    server %s %s:%d' % (SERVER % (k + 1), LOOPBACK, p) for k, p in enumerate(process_ports(base_port, processes))]
    if int(metrics_port):
        # each process's state, requests in flight and 5xx for Prometheus (file_sd job vllm_pd_front)
        lines += ['', 'frontend metrics', '    bind %s:%d' % (address, int(metrics_port)), '    no log',
                  '    http-request use-service prometheus-exporter if { path %s }' % METRICS_PATH]
    return '\n'.join(lines) + '\n'
