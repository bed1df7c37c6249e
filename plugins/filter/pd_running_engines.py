# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_running_engines
short_description: What the engines running on a host were launched with
version_added: "1.1.0"
description:
  - From the registered result of the preflight's launch read (its C(stdout), a JSON object of unit name to the argv
    words of the unit's engine process), the launch settings of each engine (as C(pd_launch) reads them, without
    environment) with C(host), C(unit) and C(kind) (V(prefill) for a C(vllm-pd-prefill*) unit, else V(decode)).
  - Units whose command line is no C(vllm serve) are left out; a result without output (skipped) gives an empty list.
options:
  _input:
    description: The registered result of the launch read.
    type: dict
    required: true
  host:
    description: The host (C(inventory_hostname)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The running engines of this host
  ansible.builtin.set_fact:
    running: "{{ launch_read | vllm_pd.ascend.pd_running_engines(host=inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: One dict per running engine, the keys of C(pd_launch) and C(host), C(unit), C(kind).
  type: list
  elements: dict
"""

import json

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_launch import running_engines


def pd_running_engines(result, host):
    return running_engines(json.loads((result or {}).get('stdout') or '{}'), host)


class FilterModule(object):
    def filters(self):
        return {"pd_running_engines": pd_running_engines}
