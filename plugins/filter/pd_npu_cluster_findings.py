# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_npu_cluster_findings
short_description: Compare the NPU readings of the hosts of one cluster (TLS switch, driver and CANN versions)
version_added: "1.1.0"
description:
  - Input is one report per host, C({host, tls, driver_version, cann_version}) as M(vllm_pd.ascend.npu_readiness)
    returns them. The value most hosts/NPUs have is the expected one; every other host or NPU gets a
    V(TlsMismatch) or V(VersionMismatch) finding naming it, the observed and expected values and the fix.
options:
  _input:
    description: The reports of the hosts of one cluster.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Compare the cluster's NPU readings
  ansible.builtin.set_fact:
    npu_cluster_findings: "{{ reports | vllm_pd.ascend.pd_npu_cluster_findings }}"
"""

RETURN = r"""
_value:
  description: Findings C({check, host, npu, observed, expected, fix, msg}).
  type: list
  elements: dict
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu.npu_checks import cluster_findings


def pd_npu_cluster_findings(reports):
    return cluster_findings([r for r in reports or [] if r])


class FilterModule(object):
    def filters(self):
        return {"pd_npu_cluster_findings": pd_npu_cluster_findings}
