# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_doctor_engines
short_description: The vLLM instances of a host as the doctor inspects them
version_added: "1.1.0"
description:
  - One entry per vLLM instance of the host (C(vllm_pd_instances), as the engine role's C(instances) tasks plan
    them), the prefill instances first, then the decode ones, with what the doctor (M(vllm_pd.ascend.pd_doctor),
    C(mode=inspect)) reads of it.
  - A prefill entry also carries its KV port group layout (C(kv_port), TP, PP, PCP sizes, first DP rank, local DP size).
options:
  _input:
    description: C(vllm_pd_instances) of the host (a dict with lists C(prefill) and C(decode)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The engines the doctor inspects on this host
  ansible.builtin.debug:
    msg: "{{ vllm_pd_instances | vllm_pd.ascend.pd_doctor_engines }}"
# -> [{kind: prefill, unit: vllm-pd-prefill.service, env_file: ..., api_port: 8100, container: '', container_engine: podman,
#      kv_port: 30000, tp_size: 2, pp_size: 1, pcp_size: 1, dp_rank_start: 0, dp_size: 1},
#     {kind: decode, unit: vllm-pd-decode.service, ...}]
"""

RETURN = r"""
_value:
  description: One dict per instance, prefill first.
  type: list
  elements: dict
  contains:
    kind:
      description: V(prefill) or V(decode).
      type: str
    unit:
      description: The systemd unit of the instance.
      type: str
    env_file:
      description: Its environment file.
      type: str
    api_port:
      description: Its API port.
      type: int
    container:
      description: Its container (container runtime), else empty.
      type: str
    container_engine:
      description: The container engine of the container runtime.
      type: str
    kv_port:
      description: Prefill only; the first port of its KV port group.
      type: int
    tp_size:
      description: Prefill only; tensor parallel size.
      type: int
    pp_size:
      description: Prefill only; pipeline parallel size (1 when not set).
      type: int
    pcp_size:
      description: Prefill only; prefill context parallel size (1 when not set).
      type: int
    dp_rank_start:
      description: Prefill only; the first DP rank of the instance's port group.
      type: int
    dp_size:
      description: Prefill only; the DP ranks the instance runs.
      type: int
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_cluster import doctor_engines


def pd_doctor_engines(instances):
    return doctor_engines(instances)


class FilterModule(object):
    def filters(self):
        return {"pd_doctor_engines": pd_doctor_engines}
