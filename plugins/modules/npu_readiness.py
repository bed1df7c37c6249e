#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: npu_readiness
short_description: Check the Ascend NPU layer of one host (links, hccn.conf, TLS, health, processes, versions)
version_added: "1.1.0"
description:
  - Reads, in one call and with the tools run concurrently, what the vllm-ascend PD checklist asks per NPU
    (C(hccn_tool -i N -link -g), C(-net_health -g), C(-ip -g), C(-tls -g), C(-ping -g address PEER)),
    C(npu-smi info) (health, process table), C(/etc/hccn.conf), the driver's C(version.info) and the CANN
    toolkit's install info.
  - Returns named findings (V(NpuLinkDown), V(NpuNetUnhealthy), V(HccnConfMismatch), V(HccnConfMissing),
    V(NpuUnreachable), V(NpuBusy), V(NpuUnhealthy), V(VersionUnreadable), V(CannIncompatible),
    V(ContainerMountMissing), V(ShmTooSmall), V(MemlockLimited), V(NpuToolFailed), V(NpuToolsMissing)), each
    naming the host, the NPU, the observed and expected values and the fix. It fails only on bad input; the
    caller (the preflight) decides which findings stop a deployment (C(vllm_pd_ignore_checks)).
  - The readings it returns (RV(tls), RV(driver_version), RV(cann_version)) are compared across the hosts of a
    cluster by the caller (V(TlsMismatch), V(VersionMismatch)).
  - Pings follow a diagonal sample of the prefill NPU x decode NPU matrix (each NPU of both sides at least
    once), see the design notes.
  - A host without C(hccn_tool) or C(npu-smi) gets a V(NpuToolsMissing) finding and a warning.
options:
  npus:
    description: Physical ids of the NPUs the instances of this host use.
    type: list
    elements: int
    required: true
  peers:
    description: Decode NPUs to ping from these NPUs, C({host, npu, address}) each (prefill hosts only).
    type: list
    elements: dict
    default: []
  own_units:
    description: Units of this deployment; their processes on an NPU are not foreign.
    type: list
    elements: str
    default: []
  own_containers:
    description: Containers of this deployment (container runtime); their processes are not foreign.
    type: list
    elements: str
    default: []
  container_engine:
    description: Engine to resolve O(own_containers) with.
    type: str
    default: podman
  container_run_argv:
    description:
      - The run options the engine container will get (container runtime); checked for the C(/etc/hccn.conf)
        and C(hccn_tool) mounts, C(--shm-size) and C(--ulimit memlock). Omit for the systemd runtime.
    type: list
    elements: str
  vllm_ascend_version:
    description: The vllm-ascend release the engines run (e.g. V(v0.23.0)); checks the CANN version against it.
    type: str
  hccn_tool:
    description: Path of hccn_tool.
    type: path
    default: /usr/local/Ascend/driver/tools/hccn_tool
  npu_smi:
    description: Path of npu-smi; default the one on PATH or C(/usr/local/bin/npu-smi).
    type: path
  ping_packets:
    description: Packets per ping.
    type: int
    default: 3
  workers:
    description: Tool runs at once.
    type: int
    default: 16
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
  - vllm_pd.ascend.attributes.read_only
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Check the NPUs of this host's instances and ping the decode NPUs
  vllm_pd.ascend.npu_readiness:
    npus: [0, 1, 2, 3, 4, 5, 6, 7]
    peers:
      - {host: pd-d1, npu: 0, address: 29.1.170.143}
    own_units: [vllm-pd-prefill.service]
  register: npu
"""

RETURN = r"""
findings:
  description: Named findings, C({check, host, npu, observed, expected, fix, msg}).
  returned: always
  type: list
  elements: dict
tools_missing:
  description: Tools not found on the host (the NPU checks were skipped).
  returned: always
  type: list
  elements: str
npus:
  description: Readings per NPU id (link, net_health, ipaddr, netmask, conf_address, conf_netmask, tls, health).
  returned: always
  type: dict
tls:
  description: TLS switch per NPU id (for the cluster comparison).
  returned: always
  type: dict
driver_version:
  description: Driver package_version from version.info.
  returned: always
  type: str
cann_version:
  description: CANN toolkit version.
  returned: always
  type: str
pings:
  description: The pings run, C({npu, peer_host, peer_npu, address, received, sent}).
  returned: always
  type: list
  elements: dict
elapsed:
  description: Seconds the checks took.
  returned: always
  type: float
"""

import glob
import os
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.host_ops import run_to_eof
from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu import npu_parse as P
from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu import npu_checks as C
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.owners import (
    own_containers, parse_container_inspect, process_info)

PARSERS = {'-link': ('link', P.parse_link), '-net_health': ('net_health', P.parse_net_health),
           '-ip': ('ip', P.parse_ip), '-tls': ('tls', P.parse_tls)}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except (IOError, OSError):
        return None


def find_npu_smi(module, given):
    if given:
        return given if os.access(given, os.X_OK) else None
    return module.get_bin_path('npu-smi', opt_dirs=['/usr/local/bin', '/usr/local/sbin'])


def npu_reading(hccn, npu, cmd):
    rc, out, err = run_to_eof([hccn, '-i', str(npu), cmd, '-g'])
    key, parse = PARSERS[cmd]
    if cmd == '-ip' and rc == 13:   # "no ip was preset there" [facts §1]: a reading, not a tool failure
        return npu, cmd, key, dict(ipaddr=None, netmask=None), None
    value = parse(out)
    if rc != 0 or value is None:
        return npu, cmd, key, None, 'rc=%d %s' % (rc, (err or out).strip()[:200])
    return npu, cmd, key, value, None


def ping(hccn, npu, peer, packets):
    rc, out, err = run_to_eof([hccn, '-i', str(npu), '-ping', '-g', 'address', peer['address'],
                               'pkt', str(packets)])
    return npu, peer, P.parse_ping(out), (err or '').strip()[:200] if rc != 0 else None


def own_pids(params, pids):
    """pids of this deployment's engines: a unit of own_units, or a container of own_containers."""
    units = set(params['own_units'])
    ids = set()
    for name in params['own_containers']:
        argv = [params['container_engine'], 'container', 'inspect', '--format', '{{.Id}} {{.State.Pid}} {{.Name}}', name]
        rc, out, _err = run_to_eof(argv)
        c = parse_container_inspect(out) if rc == 0 else None
        if c:
            ids.add(c['id'])
    mine = own_containers()
    out = set()
    for pid in pids:
        info = process_info(pid, own=mine)
        if info['unit'] in units or (info['container'] and info['container'] in ids):
            out.add(pid)
    return out


def main():
    module = AnsibleModule(argument_spec=dict(
        npus=dict(type='list', elements='int', required=True),
        peers=dict(type='list', elements='dict', default=[]),
        own_units=dict(type='list', elements='str', default=[]),
        own_containers=dict(type='list', elements='str', default=[]),
        container_engine=dict(type='str', default='podman'),
        container_run_argv=dict(type='list', elements='str'),
        vllm_ascend_version=dict(type='str'),
        hccn_tool=dict(type='path', default=P.HCCN_TOOL),
        npu_smi=dict(type='path'),
        ping_packets=dict(type='int', default=3),
        workers=dict(type='int', default=16),
    ), supports_check_mode=True)
    params, start = module.params, time.time()
    host = os.uname()[1]
    npus = sorted(set(params['npus']))
    bad = [n for n in npus if not 0 <= n <= 15]
    if bad:
        module.fail_json(msg='npus %s: NPU physical ids are 0-15 (vllm_pd_prefill_devices/vllm_pd_decode_devices)' % bad)
    for p in params['peers']:
        if not all(k in p for k in ('host', 'npu', 'address')):
            module.fail_json(msg='peers item %r needs host, npu and address' % (p,))
    if params['workers'] < 1 or params['ping_packets'] < 1:
        module.fail_json(msg='workers and ping_packets must be >= 1')
    result = dict(changed=False, findings=[], tools_missing=[], npus={}, tls={}, pings=[],
                  driver_version=None, cann_version=None)
    hccn = params['hccn_tool'] if os.access(params['hccn_tool'], os.X_OK) else None
    smi = find_npu_smi(module, params['npu_smi'])
    if not hccn:
        result['tools_missing'].append(params['hccn_tool'])
    if not smi:
        result['tools_missing'].append(params['npu_smi'] or 'npu-smi')
    if result['tools_missing']:
        msg = ('no %s on this host: the NPU layer (links, hccn.conf, TLS, reachability, health, NPU processes) was '
               'NOT checked' % ' and '.join(result['tools_missing']))
        result['findings'].append(C.finding('NpuToolsMissing', host, None, 'missing: %s' % ', '.join(result['tools_missing']),
                                            'hccn_tool and npu-smi of the Ascend driver',
                                            'install the Ascend driver tools, or add NpuToolsMissing to '
                                            'vllm_pd_ignore_checks on a host without NPUs', msg))
        module.warn(msg)

    conf_text = read(P.HCCN_CONF)
    conf = P.parse_hccn_conf(conf_text)
    readings = dict((n, dict(errors={})) for n in npus)
    smi_out, pings = [(1, '', 'npu-smi info did not run')], []
    with ThreadPoolExecutor(max_workers=params['workers']) as pool:
        jobs = []
        if smi:
            jobs.append(pool.submit(lambda: smi_out.__setitem__(0, run_to_eof([smi, 'info']))))
        if hccn:
            jobs += [pool.submit(npu_reading, hccn, n, cmd) for n in npus for cmd in PARSERS]
            pjobs = [pool.submit(ping, hccn, n, peer, params['ping_packets'])
                     for n, peer in C.ping_plan(npus, params['peers'])]
        else:
            pjobs = []
        for j in jobs:
            r = j.result()
            if r is None:
                continue
            npu, cmd, key, value, err = r
            readings[npu][key] = value
            if err:
                readings[npu]['errors'][cmd] = err
        pings = [j.result() for j in pjobs]

    driver = P.driver_version(read(P.DRIVER_VERSION_INFO))
    infos = sorted(glob.glob(os.path.join(P.TOOLKIT_DIR, '*-linux', 'ascend_toolkit_install.info')))
    cann = P.cann_version(read(infos[0]) if infos else None, read(os.path.join(P.TOOLKIT_DIR, 'version.cfg')))
    result['driver_version'], result['cann_version'] = driver, cann

    findings = result['findings']
    if hccn:
        for n in npus:
            r, c = readings[n], conf.get(n) or {}
            findings.extend(C.npu_findings(host, n, r, c))
            ip = r.get('ip') or {}
            result['npus'][str(n)] = dict(link=r.get('link'), net_health=r.get('net_health'), ipaddr=ip.get('ipaddr'),
                                          netmask=ip.get('netmask'), conf_address=c.get('address'),
                                          conf_netmask=c.get('netmask'), tls=r.get('tls'))
            result['tls'][str(n)] = r.get('tls')
        findings.extend(C.ping_findings(host, pings))
        result['pings'] = [dict(npu=n, peer_host=p['host'], peer_npu=p['npu'], address=p['address'],
                                received=(x or {}).get('received'), sent=(x or {}).get('sent'))
                           for n, p, x, _err in pings]
    if smi:
        rc, out, err = smi_out[0]
        parsed = P.parse_npu_smi_info(out) if rc == 0 else None
        if parsed is None:  # one retry: npu-smi can fail while the driver is busy
            rc, out, err = run_to_eof([smi, 'info'])
            parsed = P.parse_npu_smi_info(out) if rc == 0 else None
        if parsed is None:
            seen = 'rc=%d stdout %r stderr %r' % (rc, out.strip()[:200], err.strip()[:200])
            findings.append(C.finding('NpuToolFailed', host, None, seen,
                                      'the npu-smi info table', 'run npu-smi info on the host and fix what it says',
                                      'npu-smi info failed'))
        else:
            for n in npus:
                chip = parsed['chips'].get(n)
                result['npus'].setdefault(str(n), {})['health'] = chip['health'] if chip else None
            busy = [p['pid'] for p in parsed['processes'] if p['phy_id'] in npus]
            findings.extend(C.process_findings(host, npus, parsed, own_pids(params, busy) if busy else set()))
    if not result['tools_missing']:
        findings.extend(C.version_findings(host, driver, cann, params['vllm_ascend_version']))
        note = C.cann_note(params['vllm_ascend_version'])
        if note and cann:
            module.warn('host %s: %s (CannIncompatible not checked)' % (host, note))
    if params['container_run_argv'] is not None:
        findings.extend(C.container_findings(host, params['container_run_argv'], conf_text is not None))
    result['elapsed'] = round(time.time() - start, 3)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
