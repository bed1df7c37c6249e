# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_restarting_roles
short_description: The roles of a cluster whose running engines a change restarts
version_added: "1.1.0"
description:
  - V(prefill) and V(decode) (each once, in the order met) for the units of the hosts that run
    (C(__preflight_active), the preflight's read) and whose files this run changes (C(vllm_pd_changing_units)).
options:
  _input:
    description: The host variables of the hosts of the cluster, one mapping per host.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: The roles a rolling change restarts
  ansible.builtin.debug:
    msg: "{{ groups['vllm_pd_prefill'] | map('extract', hostvars) | vllm_pd.ascend.pd_restarting_roles }}"
"""

RETURN = r"""
_value:
  description: The roles.
  type: list
  elements: str
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.model.cluster_engines import restarting_roles


def pd_restarting_roles(hosts):
    return restarting_roles(list(hosts or []))


class FilterModule(object):
    def filters(self):
        return {"pd_restarting_roles": pd_restarting_roles}
