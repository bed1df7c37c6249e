# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_reach_targets
short_description: The peers a host dials to prove the route to the other side of its cluster
version_added: "1.1.0"
description:
  - For a host with decode instances, the first port of the Mooncake group (as C(pd_group_ports) computes it) of the
    first prefill instance of each other host of C(vllm_pd_prefill) in its C(vllm_pd_cluster); for a host with prefill
    instances, the API port of the first decode instance of each other host of C(vllm_pd_decode) in it. A host with both
    gets both, each peer once (the first found).
  - Peers without C(vllm_pd_address) or C(vllm_pd_instances) (not resolved in this run, C(--limit)) are left out.
extends_documentation_fragment:
  - vllm_pd.ascend.inventory_view
options:
  host:
    description: The host that dials (C(inventory_hostname)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The targets of the reach check
  ansible.builtin.debug:
    msg: "{{ hostvars | vllm_pd.ascend.pd_reach_targets(groups=groups, host=inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: One item per peer, in group order, decode peers first.
  type: list
  elements: dict
  contains:
    host:
      description: The peer.
      type: str
    role:
      description: Its role, V(prefill) or V(decode).
      type: str
    address:
      description: Its chosen address (C(vllm_pd_address.address)).
      type: str
    interface:
      description: The interface of that address, empty when unknown.
      type: str
    port:
      description: The port dialled.
      type: int
    var:
      description: The variable the address came from (C(vllm_pd_host_ip) unless C(vllm_pd_address.source) says otherwise).
      type: str
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.reach_targets import reach_targets


def pd_reach_targets(hostvars, groups, host):
    return reach_targets(groups, hostvars, host)


class FilterModule(object):
    def filters(self):
        return {"pd_reach_targets": pd_reach_targets}
