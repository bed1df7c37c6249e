# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_engine_hosts
short_description: The engine hosts a rollout changes, with their cluster and role
version_added: "1.1.0"
description:
  - Every host of O(hosts) in group C(vllm_pd_prefill), then every one in C(vllm_pd_decode), each in the
    order of O(hosts); a host in both groups is listed once per role. Hosts being retired
    (C(vllm_pd_state=absent)) are left out.
  - The input of P(vllm_pd.ascend.pd_rolling_batches#filter).
extends_documentation_fragment:
  - vllm_pd.ascend.inventory_view
options:
  hosts:
    description: The hosts the run targets, in their order.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The engine hosts of this run
  ansible.builtin.debug:
    msg: "{{ hostvars | vllm_pd.ascend.pd_engine_hosts(groups=groups, hosts=ansible_play_hosts_all) }}"
# -> [{host: pd-p1, cluster: lab1, role: prefill}, {host: pd-d1, cluster: lab1, role: decode}]
"""

RETURN = r"""
_value:
  description: One item per engine host and role.
  type: list
  elements: dict
  contains:
    host:
      description: The host.
      type: str
    cluster:
      description: Its C(vllm_pd_cluster), as a string.
      type: str
    role:
      description: V(prefill) or V(decode).
      type: str
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.model.rolling import engine_hosts


def pd_engine_hosts(hostvars, groups, hosts):
    return engine_hosts(hosts, groups, hostvars)


class FilterModule(object):
    def filters(self):
        return {"pd_engine_hosts": pd_engine_hosts}
