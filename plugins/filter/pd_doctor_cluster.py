# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_doctor_cluster
short_description: What the doctor reaches from a host in its cluster, the peers it pings and the prefill ports it probes
version_added: "1.1.0"
description:
  - The hosts of the host's C(vllm_pd_cluster) are the hosts of the play in it, not being retired
    (V(vllm_pd_state=absent)), in play order.
  - C(peers), what MTU and ping go towards. For a host of C(vllm_pd_prefill), the decode hosts of the cluster; for a host
    of C(vllm_pd_decode), its prefill hosts; both (decode first) for a host in both groups. Never the host itself, and only
    hosts with an inventory address (C(vllm_pd_address)), given with it.
  - C(targets), what a decode host probes. For every prefill host of the cluster, every prefill engine the doctor's inspect
    step found with a KV port group (the registered C(__doctor_inspect) of that host), the address the engine advertises
    (read from its process) and every port of its group. Empty before the inspect step has run on the prefill hosts.
extends_documentation_fragment:
  - vllm_pd.ascend.inventory_view
options:
  host:
    description: The host (C(inventory_hostname)).
    type: str
    required: true
  play_hosts:
    description: The hosts of the play (C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: What this host reaches in its cluster
  ansible.builtin.debug:
    msg: "{{ hostvars | vllm_pd.ascend.pd_doctor_cluster(groups=groups, host=inventory_hostname, play_hosts=ansible_play_hosts_all) }}"
# on pd-d1, after the inspect step -> {peers: [{host: pd-p1, address: 10.0.0.11}],
#   targets: [{host: pd-p1, address: 10.0.0.11, ports: [30000, 30001], what: advertised}]}
"""

RETURN = r"""
_value:
  description: The peers and the targets.
  type: dict
  contains:
    peers:
      description: One dict per peer host, C(host) and its inventory C(address).
      type: list
      elements: dict
    targets:
      description:
        - One dict per prefill engine with a KV port group, C(host) (the prefill host), C(address) (the address the
          engine advertises), C(ports) (every port of its KV port group) and C(what) (always V(advertised)).
      type: list
      elements: dict
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_cluster import doctor_peers, doctor_targets


def pd_doctor_cluster(hostvars, groups, host, play_hosts):
    return {'peers': doctor_peers(hostvars, groups, host, play_hosts),
            'targets': doctor_targets(hostvars, groups, host, play_hosts)}


class FilterModule(object):
    def filters(self):
        return {"pd_doctor_cluster": pd_doctor_cluster}
