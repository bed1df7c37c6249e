# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The doctor's NPU layer: npu_readiness results of the hosts of a cluster -> doctor findings.

They are step 2 findings whose checks come after the port group's in the doctor's order (names not
in doctor_findings.CHECKS sort last within their step), so the NPU layer is judged after the port
group and before ZMTP reachability (step 3), as the field report orders them.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu.npu_checks import cluster_findings

STEP = 2
WARN_ONLY = ('NpuToolsMissing',)


def _doctor_finding(cl, f):
    return dict(cluster=cl, host=f['host'], kind=None, step=STEP, check=f['check'],
                severity='warning' if f['check'] in WARN_ONLY else 'error',
                title=f['msg'].split(' (observed ')[0],
                evidence=['observed: %s' % f['observed'], 'expected: %s' % f['expected']], fix=f['fix'])


def npu_findings(cl, members, hosts):
    """Findings of the NPU layer of one cluster: each host's own, then TLS/versions across the hosts."""
    out, reports = [], []
    for name in members:
        r = (hosts.get(name) or {}).get('npu')
        if not r:
            continue
        out += [_doctor_finding(cl, f) for f in r.get('findings') or []]
        if not r.get('tools_missing'):
            reports.append(dict(host=name, tls=r.get('tls') or {}, driver_version=r.get('driver_version'),
                                cann_version=r.get('cann_version')))
    out += [_doctor_finding(cl, f) for f in cluster_findings(reports)]
    return out
