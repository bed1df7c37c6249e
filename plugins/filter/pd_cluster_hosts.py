# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_cluster_hosts
short_description: The hosts of one cluster, by the collection's one rule of cluster membership
version_added: "1.1.0"
description:
  - The names of the hosts whose C(vllm_pd_cluster), compared as text, is O(cluster); a host without
    C(vllm_pd_cluster) belongs to no cluster.
  - Every role and filter of the collection reads cluster membership through this rule
    (C(module_utils/common/membership.py)), so the preflight, the rollout, the proxy, the doctor and the benchmark
    agree on who is in a cluster.
extends_documentation_fragment:
  - vllm_pd.ascend.inventory_view
  - vllm_pd.ascend.inventory_view.cluster
options:
  kinds:
    description:
      - Keep only the hosts of these role groups, C(vllm_pd_<kind>) for each kind (C(prefill), C(decode), C(proxy)).
      - Empty keeps hosts of any group.
    type: list
    elements: str
    default: []
  hosts:
    description:
      - The host names to take them from, in this order (the play's hosts, the run's targets).
      - Without it, the hosts of the one group of O(kinds), else every inventory host, in inventory order.
    type: list
    elements: str
  present:
    description: Leave out the hosts being retired (C(vllm_pd_state=absent)).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: The proxy host of this host's cluster
  ansible.builtin.debug:
    msg: "{{ hostvars | vllm_pd.ascend.pd_cluster_hosts(groups=groups, cluster=vllm_pd_cluster, kinds=['proxy']) | first }}"

- name: The hosts of the play in this host's cluster that are not being retired
  ansible.builtin.debug:
    msg: "{{ hostvars | vllm_pd.ascend.pd_cluster_hosts(groups=groups, cluster=vllm_pd_cluster, hosts=ansible_play_hosts,
      present=true) }}"
"""

RETURN = r"""
_value:
  description: The host names, each once, in the order taken.
  type: list
  elements: str
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.membership import cluster_hosts


def pd_cluster_hosts(hostvars, groups, cluster, kinds=None, hosts=None, present=False):
    return cluster_hosts(groups, hostvars, cluster, kind=kinds or None, hosts=hosts, present=present)


class FilterModule(object):
    def filters(self):
        return {"pd_cluster_hosts": pd_cluster_hosts}
