# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_npu_clusters_findings
short_description: The TLS and version findings of every cluster, from the NPU readiness results of its hosts
version_added: "1.1.0"
description:
  - For each of O(clusters), the hosts of O(hosts) in it whose M(vllm_pd.ascend.npu_readiness) result
    (the host variable O(result)) has TLS readings and its tools, compared as
    P(vllm_pd.ascend.pd_npu_cluster_findings#filter) compares them.
options:
  _input:
    description: hostvars.
    type: dict
    required: true
  clusters:
    description: The clusters (strings), in order.
    type: list
    elements: str
    required: true
  hosts:
    description: The hosts that reported (C(ansible_play_hosts)).
    type: list
    elements: str
    required: true
  result:
    description: The host variable that holds each host's registered M(vllm_pd.ascend.npu_readiness) result.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Compare TLS and versions across the hosts of each cluster
  ansible.builtin.set_fact:
    npu_cluster_findings: "{{ hostvars | vllm_pd.ascend.pd_npu_clusters_findings(clusters=['lab1'], hosts=ansible_play_hosts,
      result='npu_readiness_result') }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: Findings C({check, host, npu, observed, expected, fix, msg}) of every cluster, cluster by cluster.
  type: list
  elements: dict
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu.npu_checks import clusters_findings


def pd_npu_clusters_findings(hostvars, clusters, hosts, result):
    return clusters_findings(clusters, hosts, hostvars, result)


class FilterModule(object):
    def filters(self):
        return {"pd_npu_clusters_findings": pd_npu_clusters_findings}
