# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_doctor_metrics
short_description: Each engine's /metrics text as the doctor read it, or why it could not be read
version_added: "1.1.0"
description:
  - From the registered results of a M(ansible.builtin.uri) loop over the doctor's engines
    (C(pd_doctor_engines)) that read each engine's /metrics, one entry per engine for the doctor's page.
options:
  _input:
    description: The loop's C(results), each with the engine as its C(item).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: This host's /metrics reads, for the page
  ansible.builtin.debug:
    msg: "{{ __doctor_metrics.results | default([]) | vllm_pd.ascend.pd_doctor_metrics }}"
# -> [{kind: prefill, unit: vllm-pd-prefill.service, url: 'http://10.0.0.11:8100/metrics', text: '# HELP ...', error: null}]
"""

RETURN = r"""
_value:
  description: One dict per result, in its order.
  type: list
  elements: dict
  contains:
    kind:
      description: The engine's kind, V(prefill) or V(decode).
      type: str
    unit:
      description: The engine's unit.
      type: str
    url:
      description: The URL read, else null.
      type: str
    text:
      description: The /metrics text when the engine answered with status 200, else null.
      type: str
    error:
      description: When not, why (C(GET /metrics) and the result's message, else its status), else null.
      type: str
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_metrics import metrics_reads


def pd_doctor_metrics(results):
    return metrics_reads(results)


class FilterModule(object):
    def filters(self):
        return {"pd_doctor_metrics": pd_doctor_metrics}
