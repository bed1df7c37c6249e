# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_doctor_hosts
short_description: What the doctor diagnoses, per host of the play
version_added: "1.1.0"
description:
  - Every host of the play, also those that failed or were unreachable, but not those being retired
    (V(vllm_pd_state=absent), expected to run nothing), in play order.
  - Each host's collected C(__doctor_entry), or, when it has none, its C(vllm_pd_cluster), its PD groups and that it
    was not inspected; with C(proxy_members), the members its proxy served (C(__proxy_inspect_members)) or null.
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  play_hosts:
    description: The hosts of the play (C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The diagnose input
  ansible.builtin.debug:
    msg: "{{ hostvars | vllm_pd.ascend.pd_doctor_hosts(play_hosts=ansible_play_hosts_all) }}"
# -> {pd-p1: {cluster: a, groups: [prefill, proxy], address: {...}, inspect: {...}, ..., proxy_members: {...}},
#     pd-d1: {cluster: a, groups: [decode], unreachable: 'the host was unreachable or ...', proxy_members: null}}
"""

RETURN = r"""
_value:
  description: Host name to its entry.
  type: dict
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_cluster import diagnose_hosts


def pd_doctor_hosts(hostvars, play_hosts):
    return diagnose_hosts(hostvars, play_hosts)


class FilterModule(object):
    def filters(self):
        return {"pd_doctor_hosts": pd_doctor_hosts}
