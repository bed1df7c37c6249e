# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_prefill_groups
short_description: The port group of every prefill instance of a cluster, as a decode host probes it
version_added: "1.1.0"
description:
  - For each host of C(vllm_pd_prefill) in O(cluster) (not being retired, C(vllm_pd_state=absent)), in group
    order, each of its prefill instances (C(vllm_pd_instances.prefill)) with the host's address
    (C(vllm_pd_address.address)) and what M(vllm_pd.ascend.kv_port_group) needs to compute the instance's
    port group.
extends_documentation_fragment:
  - vllm_pd.ascend.inventory_view
options:
  cluster:
    description: The cluster (C(vllm_pd_cluster) of the decode host).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The prefill port groups this decode host must reach
  ansible.builtin.debug:
    msg: "{{ hostvars | vllm_pd.ascend.pd_prefill_groups(groups=groups, cluster=vllm_pd_cluster) }}"
"""

RETURN = r"""
_value:
  description: One item per prefill instance of the cluster.
  type: list
  elements: dict
  contains:
    host:
      description: The prefill host.
      type: str
    unit:
      description: The instance's systemd unit.
      type: str
    address:
      description: The host's inter-node address.
      type: str
    kv_port:
      description: The instance's kv_port.
      type: int
    tp_size:
      description: Its tensor parallel size.
      type: int
    pp_size:
      description: Its pipeline parallel size (1 when not planned).
      type: int
    pcp_size:
      description: Its prefill context parallel size (1 when not planned).
      type: int
    dp_rank_start:
      description: The first DP rank of its port group.
      type: int
    dp_size_local:
      description: The DP ranks it runs.
      type: int
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import prefill_groups


def pd_prefill_groups(hostvars, groups, cluster):
    try:
        return prefill_groups(groups, hostvars, cluster)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"pd_prefill_groups": pd_prefill_groups}
