#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: pd_doctor
short_description: Inspect a running vLLM-Ascend PD deployment and diagnose it in the field report's order
version_added: "1.0.0"
description:
  - Read-only diagnosis of a prefill/decode (PD) deployment with MooncakeConnectorV1. It never stops, starts,
    writes or removes anything on a host.
  - O(mode=inspect) runs on a PD host. For each engine unit it finds the running process (the unit's
    C(MainPID), its descendants and every pid whose cgroup is the unit), reads C(VLLM_HOST_IP) and the NIC
    variables from C(/proc/PID/environ) (and from the unit's environment file), lists the host's addresses,
    and on a prefill engine reads every port of the kv_port group with its listener, owner pid, unit and
    container, and the reserved windows the group must avoid. It also matches the engine's log lines of its
    current invocation (C(journalctl)) against the known failure messages, reads the launch settings of its
    C(vllm serve) process (argv, the engine variables P and D must share, the model files through the
    process's root) and reads the route and MTU towards the peers, with C(ping -M do) when C(ping) is installed.
  - O(mode=probe) runs on a decode host. It checks the route to each prefill address and whether every port
    of the group answers the ZMTP greeting there (what the decode engine would dial).
  - O(mode=diagnose) runs on the controller. It turns the inspect and probe results of all hosts into
    findings ordered as the field report says (1 VLLM_HOST_IP, 2 the port group and whether the running P and D
    fit together by the preflight's rules, 3 reachability, MTU, logs, stale files), the log findings by the time
    their first line was logged (the earliest signature is the cause, not the last exception), names the first
    failing one per cluster the root cause and the others consequences, and renders a summary and an HTML report.
options:
  mode:
    description: Which part of the diagnosis to run (see the description).
    type: str
    choices: [inspect, probe, diagnose]
    default: inspect
  engines:
    description: O(mode=inspect) - the engine units on this host.
    type: list
    elements: dict
    default: []
    suboptions:
      kind:
        description: V(prefill) (kv_producer, binds the group) or V(decode).
        type: str
        required: true
        choices: [prefill, decode]
      unit:
        description: systemd unit of the engine.
        type: str
        required: true
      env_file:
        description: The unit's environment file, read to tell a stale process from a wrong file.
        type: path
      container:
        description:
          - Name of the podman/docker container the unit runs the engine in (the container runtime). Its
            processes count as the engine's (they are not in the unit's cgroup), and C(VLLM_HOST_IP) is read
            from the container's init process.
        type: str
      container_engine:
        description: V(podman) or V(docker), the engine of O(engines[].container).
        type: str
        choices: [podman, docker]
        default: podman
      kv_port:
        description: First port of the kv_port group (prefill).
        type: int
      tp_size:
        description: Tensor-parallel size (prefill).
        type: int
        default: 1
      pp_size:
        description: Pipeline-parallel size (prefill); the group is C(tp*pp*pcp) ports per DP rank.
        type: int
        default: 1
      pcp_size:
        description: Prefill-context-parallel size (prefill).
        type: int
        default: 1
      dp_rank_start:
        description: First data-parallel rank the engine serves (prefill; an external DP rank).
        type: int
        default: 0
      dp_size:
        description: Local data-parallel size, the number of ranks the engine serves (prefill).
        type: int
        default: 1
      api_port:
        description: OpenAI API port of the engine.
        type: int
  proxy:
    description:
      - O(mode=inspect) - the proxy on this host, with keys C(unit) and C(port), and C(front) (bool) for the proxy tier,
        where C(unit) is HAProxy's and its runtime API is read for each process of the proxy.
    type: dict
  address:
    description: O(mode=inspect) - the inventory's inter-node address of this host (the expected C(VLLM_HOST_IP)).
    type: str
  peers:
    description:
      - O(mode=inspect) - the inventory addresses of the other side's hosts of the same cluster, each a dict with
        C(host) and C(address). Only these addresses get a route lookup and a C(ping).
    type: list
    elements: dict
    default: []
  ping:
    description: O(mode=inspect) - send one C(ping -M do) at the path MTU to each peer (when C(ping) exists).
    type: bool
    default: true
  extra_reserved:
    description: O(mode=inspect) - API and proxy ports (V(8000), V(9000-9010)) that must not lie inside the group.
    type: list
    elements: str
    default: []
  npu_count:
    description: O(mode=inspect) - NPUs of the host for the ADXL window; default the C(/dev/davinciN) count, else 8.
    type: int
  log_lines:
    description: O(mode=inspect) - at most this many of the engine's latest log lines are read.
    type: int
    default: 5000
  targets:
    description:
      - O(mode=probe) - what to probe, each a dict with C(host) (the prefill host), C(address), C(ports) (list of
        int) and C(what) (V(advertised) or V(inventory)).
    type: list
    elements: dict
    default: []
  probe_timeout:
    description: O(mode=probe) - seconds for each TCP connect and ZMTP greeting.
    type: float
    default: 1.0
  hosts:
    description:
      - O(mode=diagnose) - per inventory host, its C(cluster), C(groups), C(address) (the resolved address
        dict or null), C(address_error), C(unreachable), and the results C(inspect), C(probe) and C(residue).
      - Optional, for the page - C(metrics) (per engine C(kind), C(unit), C(url) and the C(text) of its
        C(/metrics) or an C(error)), C(kv_log) (a decode host's C(text), the journal lines
        C(KV cache transfer for request ... took N ms) of the window, or an C(error)) and C(proxy_members) (a proxy
        host's C(source), C(error), C(live), C(desired), C(missing), C(extra), C(draining)).
    type: dict
    default: {}
  kv_window:
    description: O(mode=diagnose) - the journal window the C(kv_log) lines come from, as the page names it.
    type: str
    default: ''
  title:
    description: O(mode=diagnose) - title of the HTML report.
    type: str
    default: vLLM PD doctor
attributes:
  platform:
    details: Linux only (reads C(/proc), runs C(systemctl), C(journalctl) and C(ip)).
notes:
  - Run O(mode=inspect) with C(become) so that other users' sockets and process environments are visible.
  - The socket table is the one of the module's network namespace.
seealso:
  - module: vllm_pd.ascend.kv_port_group
  - module: vllm_pd.ascend.mooncake_residue
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
  - vllm_pd.ascend.attributes.read_only
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Inspect the prefill engine of this host
  vllm_pd.ascend.pd_doctor:
    mode: inspect
    address: 10.0.30.10
    engines:
      - {kind: prefill, unit: vllm-pd-prefill.service, env_file: /etc/vllm-pd/prefill.env,
         kv_port: 28002, tp_size: 8, api_port: 8100}
    peers: [{host: d1, address: 10.0.30.11}]
    extra_reserved: ["8000", "8100"]
  become: true
  register: inspect

- name: From the decode host, probe what the prefill engine advertises
  vllm_pd.ascend.pd_doctor:
    mode: probe
    targets:
      - {host: p1, address: 10.0.30.10, ports: [28002, 28003, 28004, 28005, 28006, 28007, 28008, 28009],
         what: advertised}

- name: Diagnose on the controller
  vllm_pd.ascend.pd_doctor:
    mode: diagnose
    hosts: "{{ doctor_hosts }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
host:
  description:
    - O(mode=inspect) - C(addresses) (list of dicts ifname, family, address, prefix), C(mtu) (ifname to MTU),
      C(default_dev) and C(default_src) (what vLLM auto-detection picks).
  returned: when mode is inspect
  type: dict
engines:
  description:
    - O(mode=inspect) - per engine C(kind), C(unit), C(state) (systemctl show properties), C(pid), C(pids),
      C(container) (C(id), C(pid), C(name) of O(engines[].container), or null),
      C(env) (address variables of the process, or null when no process runs), C(env_file) (same variables of
      the file), C(advertised) (C(address), C(source)), C(api_listening), C(logs) (matched hints with lines),
      C(tail) (last log lines when the unit is not active), C(launch) (model, tp, settings, kv_extra, env, model_facts
      of the C(vllm serve) process, or null), and for prefill C(group).
    - C(group) has C(ports), C(address), C(ok), C(closed), C(foreign), C(wrong_address), C(misleading),
      C(blocking) (holder records as in kv_port_group), C(engine_addresses) and C(windows) (range findings).
  returned: when mode is inspect
  type: list
  elements: dict
proxy:
  description:
    - O(mode=inspect) - C(unit), C(port), C(state), C(listening), C(listeners).
    - For the proxy tier, when HAProxy runs, C(tier) - C(front) (V(running), V(down) or V(unreadable)), C(error) and
      C(processes), per HAProxy server its C(unit), C(status), C(in_flight), C(queued), C(errors_5xx), C(check) and
      C(last_check).
  returned: when mode is inspect and proxy is given
  type: dict
peers:
  description: O(mode=inspect) - per peer C(host), C(address), C(route), C(mtu), C(ping) (C(ok), C(size), C(output)).
  returned: when mode is inspect
  type: list
  elements: dict
targets:
  description: O(mode=probe) - per target the input plus C(route) and C(probes) (per port C(result) and C(detail)).
  returned: when mode is probe
  type: list
  elements: dict
findings:
  description:
    - O(mode=diagnose) - ordered findings, each with C(cluster), C(host), C(step), C(check), C(severity),
      C(title), C(evidence) (list of str), C(fix) and C(role) (V(root cause), V(consequence) or V(note)).
  returned: when mode is diagnose
  type: list
  elements: dict
clusters:
  description:
    - O(mode=diagnose) - per cluster C(name), C(status), C(root_cause), C(hosts) and C(links).
    - For the page also C(instances) (per engine its state and each kv_port's C(port), C(state), C(detail)),
      C(proxy_members), C(kv_transfer) (per P->D pair C(pair), C(requests), C(ms) percentiles and C(samples)),
      C(kv_silent) (decode hosts without a transfer line, with C(finished), the requests their engines finished
      since they started, null when unread) and C(latency) (per engine C(ttft_ms), C(itl_ms), C(e2el_ms) estimated
      from its C(/metrics) histograms, C(n), C(mean), C(p50), C(p90), C(p99), C(bins)).
  returned: when mode is diagnose
  type: list
  elements: dict
summary:
  description: O(mode=diagnose) - the summary table as text lines, one block per cluster.
  returned: when mode is diagnose
  type: list
  elements: str
html:
  description:
    - O(mode=diagnose) - the HTML page, self-contained (inline CSS and SVG, no script) - topology, findings, ports,
      proxy members, KV transfer per P->D pair and latency distributions per engine.
  returned: when mode is diagnose
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import params as P
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_findings import diagnose
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_host import (
    addresses_of, parse_default_route, parse_link_mtu, parse_route_get,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.ip_addr import parse_ip_addr
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_inspect import (
    PROC, Host, inspect_engine, inspect_peer, inspect_proxy,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_page import observe
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_report import render_html, summary_lines
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import parse_port_list
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.zmtp import probe_many


def run_inspect(module):
    p = module.params
    host = Host(module)
    # the preflight's reader (VLLM_HOST_IP is resolved from it), in the fields this module returns
    addrs = [dict((k, a[k]) for k in ('ifname', 'family', 'address', 'prefix')) for a in parse_ip_addr(host.ip('addr', 'show') or '')]
    mtus = parse_link_mtu(host.ip('link', 'show') or '')
    dev = parse_default_route(host.ip('route', 'show', 'default') or '')
    src = (addresses_of(addrs, dev) or [None])[0] if dev else None
    facts = dict(addresses=addrs, mtu=mtus, default_dev=dev, default_src=src)
    engines = []
    for eng in p['engines']:
        for key, default in (('tp_size', 1), ('pp_size', 1), ('pcp_size', 1), ('dp_rank_start', 0), ('dp_size', 1)):
            eng[key] = int(eng.get(key) or default)
        if eng.get('kv_port') is not None:
            eng['kv_port'] = int(eng['kv_port'])
        if eng.get('api_port') is not None:
            eng['api_port'] = int(eng['api_port'])
        engines.append(inspect_engine(host, eng, p, facts))
    result = dict(changed=False, host=facts, engines=engines,
                  peers=[inspect_peer(host, peer, mtus, p['ping']) for peer in p['peers']])
    if p['proxy']:
        result['proxy'] = inspect_proxy(host, p['proxy'])
    module.exit_json(**result)


def run_probe(module):
    p = module.params
    host = Host(module)
    out = []
    for t in p['targets']:
        t = dict(t)
        ports = [int(x) for x in t.get('ports') or []]
        text = host.ip('route', 'get', t['address']) if t.get('address') else None
        t['route'] = parse_route_get(text) if text is not None else dict(type='error', dev=None, src=None, via=None,
                                                                         mtu=None)
        t['route_text'] = ' '.join((text or '').split())
        t['probes'] = probe_many(t['address'], ports, timeout=p['probe_timeout']) if t.get('address') else []
        out.append(t)
    module.exit_json(changed=False, targets=out)


def run_diagnose(module):
    p = module.params
    findings, clusters = diagnose(p['hosts'])
    observe(p['hosts'], clusters)
    module.exit_json(changed=False, findings=findings, clusters=clusters, summary=summary_lines(clusters, findings),
                     html=render_html(clusters, findings, p['title'], p['kv_window']))


def _given(value, default):
    return default if value is None else value


def validate(p):
    """Every value the mode uses is checked first (raises params.ParamError naming it), so no read or
    probe meets a port, timeout or address it cannot take."""
    ipfix = 'give the literal IP address'
    if p['mode'] == 'probe':
        P.timeout('probe_timeout', p['probe_timeout'])
        for i, t in enumerate(p['targets']):
            if not isinstance(t, dict):
                raise P.ParamError('targets[%d]' % i, t, 'each target is a dict {host, address, ports}')
            if t.get('address'):
                P.ip_address('targets[%d].address' % i, t['address'], ipfix)
            ports = t.get('ports') or []
            if not isinstance(ports, list):
                raise P.ParamError('targets[%d].ports' % i, ports, 'give a list of ports')
            for j, port in enumerate(ports):
                P.port('targets[%d].ports[%d]' % (i, j), port)
        return
    if p['mode'] != 'inspect':
        return
    P.as_int('log_lines', p['log_lines'], 1, 1000000)
    if p['npu_count'] is not None:
        P.as_int('npu_count', p['npu_count'], 1, 4096, 'an NPU count is >= 1 (leave it unset to count /dev/davinciN)')
    if p['address']:
        P.ip_address('address', p['address'], ipfix + ' the prefill engine binds (VLLM_HOST_IP)')
    for item in p['extra_reserved']:
        try:
            ranges = parse_port_list(str(item))
        except ValueError:
            ranges = [(0, 0)]
        if not ranges or any(lo < 1 or hi > P.MAX_PORT for lo, hi in ranges):
            raise P.ParamError('extra_reserved', item, 'give a port (1-65535) or a range like 9000-9010')
    for i, eng in enumerate(p['engines']):
        pre = 'engines[%d].' % i
        if eng.get('kv_port') is not None:
            P.group_sizes(eng['kv_port'], _given(eng.get('tp_size'), 1), 1, 1, _given(eng.get('dp_rank_start'), 0),
                          _given(eng.get('dp_size'), 1), prefix=pre, dp_size_name='dp_size')
        if eng.get('api_port') is not None:
            P.port(pre + 'api_port', eng['api_port'])
    for i, peer in enumerate(p['peers']):
        if not isinstance(peer, dict):
            raise P.ParamError('peers[%d]' % i, peer, 'each peer is a dict {host, address}')
        if peer.get('address'):
            P.ip_address('peers[%d].address' % i, peer['address'], ipfix)
    if p['proxy']:
        if p['proxy'].get('port') is not None:
            P.port('proxy.port', p['proxy']['port'])
        if p['proxy'].get('unit') is not None:
            P.unit_name('proxy.unit', p['proxy']['unit'])
    for i, eng in enumerate(p['engines']):
        P.unit_name('engines[%d].unit' % i, eng['unit'])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type='str', choices=['inspect', 'probe', 'diagnose'], default='inspect'),
            engines=dict(type='list', elements='dict', default=[], options=dict(
                kind=dict(type='str', required=True, choices=['prefill', 'decode']),
                unit=dict(type='str', required=True),
                env_file=dict(type='path'),
                container=dict(type='str'),
                container_engine=dict(type='str', choices=['podman', 'docker'], default='podman'),
                kv_port=dict(type='int'),
                tp_size=dict(type='int', default=1),
                pp_size=dict(type='int', default=1),
                pcp_size=dict(type='int', default=1),
                dp_rank_start=dict(type='int', default=0),
                dp_size=dict(type='int', default=1),
                api_port=dict(type='int'))),
            proxy=dict(type='dict'),
            address=dict(type='str'),
            peers=dict(type='list', elements='dict', default=[]),
            ping=dict(type='bool', default=True),
            extra_reserved=dict(type='list', elements='str', default=[]),
            npu_count=dict(type='int'),
            log_lines=dict(type='int', default=5000),
            targets=dict(type='list', elements='dict', default=[]),
            probe_timeout=dict(type='float', default=1.0),
            hosts=dict(type='dict', default={}),
            title=dict(type='str', default='vLLM PD doctor'),
            kv_window=dict(type='str', default=''),
        ),
        supports_check_mode=True,
    )
    mode = module.params['mode']
    try:
        validate(module.params)
    except P.ParamError as e:
        module.fail_json(msg=str(e))
    if mode == 'inspect':
        if not module.params['address'] and any(e['kind'] == 'prefill' for e in module.params['engines']):
            module.fail_json(msg='mode=inspect of a prefill engine needs address (the inventory address)')
        if not os.path.isdir(PROC):
            module.fail_json(msg='%s is missing: pd_doctor reads Linux /proc' % PROC)
        run_inspect(module)
    elif mode == 'probe':
        run_probe(module)
    else:
        run_diagnose(module)


if __name__ == '__main__':
    main()
