# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_api_port_checks
short_description: The API ports of a host's planned instances to check for being free
version_added: "1.1.0"
description:
  - The API port of each planned instance (prefill first) whose unit does not run (O(active)); a running unit keeps
    its port.
options:
  _input:
    description: The host's planned instances (C(vllm_pd_instances), C(prefill) and C(decode) lists).
    type: dict
    required: true
  active:
    description: The units that run on the host.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The API ports to check
  ansible.builtin.debug:
    msg: "{{ vllm_pd_instances | vllm_pd.ascend.pd_api_port_checks(active=['vllm-pd-decode.service']) }}"
"""

RETURN = r"""
_value:
  description: One item per port.
  type: list
  elements: dict
  contains:
    what:
      description: V(NAME API), the instance's name.
      type: str
    port:
      description: The port.
      type: int
    var:
      description: The variable that sets it (C(prefill_api_port), C(decode_api_port)).
      type: str
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import api_port_checks


def pd_api_port_checks(instances, active):
    return api_port_checks(instances, list(active or []))


class FilterModule(object):
    def filters(self):
        return {"pd_api_port_checks": pd_api_port_checks}
