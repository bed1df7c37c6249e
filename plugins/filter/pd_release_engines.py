# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_release_engines
short_description: The release every engine of a cluster runs, as pd_release_findings compares them
version_added: "1.1.0"
description:
  - For each host of C(vllm_pd_prefill), then of C(vllm_pd_decode), whose C(vllm_pd_cluster) is O(cluster), its
    C(vllm_pd_release[KIND]) (the release the engine role read) with C(host) and C(kind).
  - Hosts with C(vllm_pd_state=absent) and hosts whose release was not read in this run (C(--limit)) are left out.
extends_documentation_fragment:
  - vllm_pd.ascend.inventory_view
  - vllm_pd.ascend.inventory_view.cluster
"""

EXAMPLES = r"""
- name: The release findings of this host's cluster
  ansible.builtin.debug:
    msg: "{{ hostvars | vllm_pd.ascend.pd_release_engines(groups=groups, cluster=vllm_pd_cluster)
      | vllm_pd.ascend.pd_release_findings(cluster=vllm_pd_cluster) }}"
"""

RETURN = r"""
_value:
  description: One dict per engine host and kind, its release facts and C(host), C(kind).
  type: list
  elements: dict
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.model.cluster_engines import release_engines


def pd_release_engines(hostvars, groups, cluster):
    return release_engines(groups, hostvars, cluster)


class FilterModule(object):
    def filters(self):
        return {"pd_release_engines": pd_release_engines}
