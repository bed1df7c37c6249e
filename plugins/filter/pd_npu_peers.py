# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_npu_peers
short_description: The NPUs of the decode hosts of a prefill host's cluster, with their RoCE addresses
version_added: "1.1.0"
description:
  - For a host in C(vllm_pd_prefill), every NPU of the decode instances (C(vllm_pd_instances.decode)) of each other
    host of C(vllm_pd_decode) in its C(vllm_pd_cluster), with the address that host's /etc/hccn.conf gives it;
    the peers the NPU readiness check pings. NPUs without an address in hccn.conf are left out.
  - Any other host gets an empty list.
extends_documentation_fragment:
  - vllm_pd.ascend.inventory_view
options:
  host:
    description: The prefill host (C(inventory_hostname)).
    type: str
    required: true
  hccn_var:
    description: The host variable that holds each decode host's /etc/hccn.conf text.
    type: str
    required: true
  slurped:
    description: The variable is a registered M(ansible.builtin.slurp) result (its base64 C(content)).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: The decode NPUs this prefill host pings
  ansible.builtin.debug:
    msg: "{{ hostvars | vllm_pd.ascend.pd_npu_peers(groups=groups, host=inventory_hostname, hccn_var='hccn', slurped=true) }}"
"""

RETURN = r"""
_value:
  description: One item per decode NPU with an address.
  type: list
  elements: dict
  contains:
    host:
      description: The decode host.
      type: str
    npu:
      description: The physical NPU id.
      type: int
    address:
      description: Its address in that host's /etc/hccn.conf.
      type: str
"""

import base64

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.membership import cluster_hosts
from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu.npu_parse import npu_peers


def _text(value, slurped):
    if slurped:
        content = value.get('content') if isinstance(value, dict) else None
        return to_text(base64.b64decode(content)) if content else ''
    return value or ''


def pd_npu_peers(hostvars, groups, host, hccn_var, slurped=False):
    if host not in (groups.get('vllm_pd_prefill') or []):
        return []
    decode = []
    for peer in cluster_hosts(groups, hostvars, hostvars[host].get('vllm_pd_cluster', ''), 'decode'):
        if peer == host:
            continue
        peer_vars = hostvars[peer]
        decode.append((peer, _text(peer_vars.get(hccn_var), slurped),
                       (peer_vars.get('vllm_pd_instances') or {}).get('decode') or []))
    return npu_peers(decode)


class FilterModule(object):
    def filters(self):
        return {"pd_npu_peers": pd_npu_peers}
