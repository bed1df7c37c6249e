# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NPU-layer judgement (shared/docs/ascend-node-facts.md §1-§5): raw readings of one host -> named
findings; the ping plan; the cluster-wide comparisons (TLS, versions) done on the controller.

A finding: {check, host, npu, observed, expected, fix, msg}; check names are those of
check_names.CHECKS. Pure functions over plain data.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from collections.abc import Mapping

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.membership import cluster_hosts
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu.npu_parse import (
    memlock_unlimited, mounted_paths, parse_size, run_option_values)

MIN_SHM_MB = 1024
IN_CONTAINER = ('/etc/hccn.conf', '/usr/local/Ascend/driver/tools/hccn_tool')


def finding(check, host, npu, observed, expected, fix, msg):
    return dict(check=check, host=host, npu=npu, observed=observed, expected=expected, fix=fix,
                msg='host %s%s: %s (observed %s, expected %s). Fix: %s' % (
                    host, '' if npu is None else ', NPU %s' % npu, msg, observed, expected, fix))


def ping_plan(local, peers):
    """Which local NPU pings which peer NPU: per peer host, a diagonal over both NPU lists.

    local: [phy ids]; peers: [{host, npu, address}]. Each local NPU and each peer NPU is in at
    least one pair, max(len(local), len(peer NPUs)) pings per peer host instead of the full
    len(local) x len(peer) matrix (256 on two 16-NPU hosts: over the 2 s budget). A RoCE fault is a
    port, a cable or a switch path of one NPU, so covering every NPU once finds it; full-mesh
    isolation of single pairs (VLAN per pair) is the case a sample can miss.
    """
    local = sorted(int(n) for n in local)
    by_host = {}
    for p in peers or []:
        by_host.setdefault(p['host'], []).append(p)
    out = []
    if not local:
        return out
    for host in sorted(by_host):
        ps = sorted(by_host[host], key=lambda p: int(p['npu']))
        for k in range(max(len(local), len(ps))):
            out.append((local[k % len(local)], ps[k % len(ps)]))
    return out


def npu_findings(host, npu, r, conf):
    """Findings of one NPU. r: {link, net_health, ip: {ipaddr, netmask}|None, tls, errors: {cmd: text}};
    conf: the NPU's /etc/hccn.conf entries ({address, netmask, ...}) or None."""
    out = []
    for cmd, err in sorted((r.get('errors') or {}).items()):
        out.append(finding('NpuToolFailed', host, npu, err, 'exit 0 and the documented output',
                           'run `hccn_tool -i %s %s -g` on the host and fix what it says' % (npu, cmd),
                           'hccn_tool %s failed' % cmd))
    if r.get('link') is not None and r['link'] != 'UP':
        out.append(finding('NpuLinkDown', host, npu, 'link status: %s' % r['link'], 'link status: UP',
                           'check the NIC cable, optics and switch port of NPU %s (hccn_tool -i %s -link -g)' % (npu, npu),
                           'the NPU NIC link is down: KV transfers over it fail'))
    if r.get('net_health') is not None and r['net_health'] != 'Success':
        out.append(finding('NpuNetUnhealthy', host, npu, 'net health status: %s' % r['net_health'],
                           'net health status: Success',
                           'check netdetect_%s/gateway_%s in /etc/hccn.conf and the path to them '
                           '(hccn_tool -i %s -netdetect -g, -gateway -g)' % (npu, npu, npu),
                           'the NPU network health check fails'))
    ip = r.get('ip')
    if not conf or not conf.get('address'):
        out.append(finding('HccnConfMissing', host, npu, 'no address_%s' % npu, 'address_%s=<NPU IP>' % npu,
                           'add address_%s and netmask_%s to /etc/hccn.conf (Mooncake reads the file)' % (npu, npu),
                           '/etc/hccn.conf does not name this NPU'))
    elif ip is not None:
        if ip.get('ipaddr') != conf.get('address'):
            out.append(finding('HccnConfMismatch', host, npu, 'ipaddr:%s' % ip.get('ipaddr'),
                               'address_%s=%s' % (npu, conf.get('address')),
                               'set the NPU IP to the file (hccn_tool -i %s -ip -s address %s netmask %s) or correct '
                               'address_%s in /etc/hccn.conf, then restart the engines' % (
                                   npu, conf.get('address'), conf.get('netmask') or ip.get('netmask'), npu),
                               'the NPU IP differs from /etc/hccn.conf: HcclCommPrepare fails, transfers are slow '
                               'or fail'))
        elif conf.get('netmask') and ip.get('netmask') and ip['netmask'] != conf['netmask']:
            out.append(finding('HccnConfMismatch', host, npu, 'netmask:%s' % ip['netmask'],
                               'netmask_%s=%s' % (npu, conf['netmask']),
                               'make netmask_%s and the NPU netmask equal' % npu, 'the NPU netmask differs'))
    return out


def process_findings(host, npus, smi, own_pids):
    """NpuUnhealthy / NpuBusy from a parsed `npu-smi info` for the instance NPUs; own_pids: pids of
    this deployment's engines (not foreign)."""
    out = []
    want = set(int(n) for n in npus)
    for phy in sorted(want):
        chip = smi['chips'].get(phy)
        if chip is None:
            out.append(finding('NpuUnhealthy', host, phy, 'not listed by npu-smi info', 'Health OK',
                               'check the driver sees the NPU (npu-smi info -m) or correct the instance devices',
                               'npu-smi does not list this NPU'))
        elif chip['health'] != 'OK':
            out.append(finding('NpuUnhealthy', host, phy, 'Health %s' % chip['health'], 'Health OK',
                               'read npu-smi info -t health -i %s -c %s and clear or repair the fault' % (
                                   chip['npu'], chip['chip']),
                               'the NPU is not healthy: engines fail late'))
    for p in smi['processes']:
        if p['phy_id'] in want and p['pid'] not in own_pids:
            out.append(finding('NpuBusy', host, p['phy_id'],
                               'pid %s%s uses %s MB' % (p['pid'], ' (%s)' % p['name'] if p['name'] else '', p['memory_mb']),
                               'no process of another program',
                               'stop pid %s or give the instance other NPUs (vllm_pd_prefill_devices/'
                               'vllm_pd_decode_devices)' % p['pid'],
                               'another process uses the NPU: the engine fails with "Free memory on device ... '
                               'less than desired"'))
    return out


def ping_findings(host, results):
    """results: [(local npu, peer {host, npu, address}, parsed ping or None, error text)]."""
    out = []
    for npu, peer, parsed, err in results:
        if parsed is not None and parsed['received'] == parsed['sent'] and parsed['sent'] > 0:
            continue
        seen = ('%d/%d received' % (parsed['received'], parsed['sent'])) if parsed else (err or 'no ping output')
        out.append(finding('NpuUnreachable', host, npu, seen, '0.00%% packet loss to %s NPU %s (%s)' % (
            peer['host'], peer['npu'], peer['address']),
            'check the RoCE path between NPU %s of %s and NPU %s of %s (switch, VLAN, '
            'hccn_tool -i %s -ping -g address %s)' % (npu, host, peer['npu'], peer['host'], npu, peer['address']),
            'the prefill NPU cannot reach the decode NPU'))
    return out


def _cann_of(version):
    try:
        return releases.cann_for(version) if version else None
    except ValueError:
        return None


def cann_note(vllm_ascend_version):
    """A sentence when the CANN check cannot be made for VLLM_ASCEND_VERSION (no release, or no CANN row), else None."""
    if not vllm_ascend_version:
        return 'the vllm-ascend release is not known here, so CANN was not compared with the CANN it is built with'
    if _cann_of(vllm_ascend_version) is None:
        return ('vllm-ascend %s has no CANN row in the release table (plugins/module_utils/common/releases.py), so '
                'CANN was not compared with the CANN it is built with' % vllm_ascend_version)
    return None


def version_findings(host, driver, cann, vllm_ascend_version=None):
    out = []
    if not driver:
        out.append(finding('VersionUnreadable', host, None, 'no package_version/Version',
                           '/usr/local/Ascend/driver/version.info', 'reinstall the Ascend driver',
                           'the driver version cannot be read'))
    if not cann:
        out.append(finding('VersionUnreadable', host, None, 'no CANN version',
                           'ascend-toolkit/latest/<arch>-linux/ascend_toolkit_install.info or latest/version.cfg',
                           'install the CANN toolkit (or source its set_env.sh path)', 'the CANN version cannot be read'))
    # the release table knows each release's CANN (a post release is its base release: 0.23.0.post1 -> 9.1.0)
    want = _cann_of(vllm_ascend_version)
    if cann and want and cann != want:
        out.append(finding('CannIncompatible', host, None, 'CANN %s' % cann, 'CANN %s for vllm-ascend %s' % (
            want, vllm_ascend_version), 'install CANN %s or the vllm-ascend release built for CANN %s' % (want, cann),
            'the CANN toolkit does not match the vllm-ascend release'))
    return out


def container_findings(host, run_argv, conf_exists):
    """Container runtime: the engine's planned run argv must mount hccn.conf/hccn_tool, size /dev/shm
    and lift memlock (facts §2: the PD guide mounts both; field-failures 12)."""
    out = []
    mounted = mounted_paths(run_argv)
    for path in IN_CONTAINER:
        if path not in mounted and (conf_exists or path != '/etc/hccn.conf'):
            out.append(finding('ContainerMountMissing', host, None, 'not mounted', '--volume=%s:%s:ro' % (path, path),
                               'add "--volume=%s:%s:ro" to vllm_pd_container_run_options' % (path, path),
                               'the engine container would not see %s: the service starts and answers '
                               'wrongly' % path))
    sizes = [parse_size(v) for v in run_option_values(run_argv, '--shm-size')]
    size = sizes[-1] if sizes and sizes[-1] is not None else 64 * 1024 ** 2
    if size < MIN_SHM_MB * 1024 ** 2:
        out.append(finding('ShmTooSmall', host, None, '/dev/shm %d MB' % (size // 1024 ** 2), '>= %d MB' % MIN_SHM_MB,
                           'add "--shm-size=16g" (or at least 1g) to vllm_pd_container_run_options',
                           'EngineCore core-dumps with the 64 MB default /dev/shm'))
    if not memlock_unlimited(run_argv):
        out.append(finding('MemlockLimited', host, None, 'memlock limited', 'memlock unlimited',
                           'add "--ulimit=memlock=-1:-1" to vllm_pd_container_run_options',
                           'RDMA memory registration needs an unlimited memlock'))
    return out


def _majority(values):
    """The most frequent value, or None on a tie (then no value is 'the odd one out')."""
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    ranked = sorted(counts, key=lambda v: (-counts[v], str(v)))
    if not ranked or (len(ranked) > 1 and counts[ranked[0]] == counts[ranked[1]]):
        return None
    return ranked[0]


def cluster_findings(reports):
    """reports: [{host, tls: {npu: 0|1}, driver_version, cann_version}] of one cluster -> TlsMismatch,
    VersionMismatch against the majority value (the odd ones out are named)."""
    out = []
    # A tie (two hosts, two values) has no odd one out: every host then gets the finding.
    tls = [(r['host'], n, v) for r in reports for n, v in sorted((r.get('tls') or {}).items()) if v is not None]
    if len(set(t[2] for t in tls)) > 1:
        want = _majority([t[2] for t in tls])
        for host, npu, v in tls:
            if v != want:
                other = want if want is not None else 1 - v
                out.append(finding('TlsMismatch', host, npu, 'tls switch[%s]' % v, 'tls switch[%s] as on the other %d NPU(s)'
                                   % (other, sum(1 for t in tls if t[2] == other)),
                                   'hccn_tool -i %s -tls -s enable %s (one setting on every NPU of every host)' % (npu, other),
                                   'TLS differs across the cluster: transfers fail'))
    for key, what in (('driver_version', 'driver'), ('cann_version', 'CANN')):
        vals = [(r['host'], r.get(key)) for r in reports if r.get(key)]
        if len(set(x[1] for x in vals)) < 2:
            continue
        want = _majority([x[1] for x in vals])
        for host, v in vals:
            if v != want:
                others = sorted(set('%s on %s' % (x, h) for h, x in vals if x != v))
                out.append(finding('VersionMismatch', host, None, '%s %s' % (what, v), '%s %s' % (what, ', '.join(others)),
                                   'install one %s version on every host of the cluster (P and D must run the same '
                                   'stack)%s' % (what, '' if want is None else ': %s on %s' % (want, host)),
                                   '%s versions differ across the cluster' % what))
    return out


def clusters_findings(clusters, hosts, hostvars, result):
    """cluster_findings() of each of CLUSTERS (strings, in order) over the HOSTS (the play's) of that cluster
    whose npu_readiness result (the host variable RESULT in HOSTVARS) has TLS readings and its tools: the
    findings of every cluster, one list."""
    out = []
    for cluster in clusters:
        reports = []
        for host in cluster_hosts({}, hostvars, cluster, hosts=hosts):
            r = hostvars[host].get(result)
            if not isinstance(r, Mapping) or 'tls' not in r or r['tools_missing']:
                continue
            reports.append({'host': host, 'tls': r['tls'], 'driver_version': r['driver_version'],
                            'cann_version': r['cann_version']})
        out.extend(cluster_findings(reports))
    return out


def split_ignored(findings, ignore):
    """(failing, ignored-as-warnings) by check name."""
    ignore = set(ignore or [])
    return [f for f in findings if f['check'] not in ignore], [f for f in findings if f['check'] in ignore]
