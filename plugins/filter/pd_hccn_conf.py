# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_hccn_conf
short_description: Parse /etc/hccn.conf into per-NPU settings
version_added: "1.1.0"
description:
  - "C(<key>_<phyid>=<value>) lines (the Ascend driver's format) become a dict: physical NPU id ->
    settings, e.g. C(address_0=29.1.137.205) becomes C(address) of NPU 0."
  - Empty or missing text gives an empty dict.
options:
  _input:
    description: The text of /etc/hccn.conf.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The address of NPU 0 of a decode host
  ansible.builtin.debug:
    msg: "{{ (hccn.content | b64decode | vllm_pd.ascend.pd_hccn_conf)[0].address }}"
"""

RETURN = r"""
_value:
  description: Settings per physical NPU id.
  type: dict
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu.npu_parse import parse_hccn_conf


def pd_hccn_conf(text):
    return parse_hccn_conf(text or '')


class FilterModule(object):
    def filters(self):
        return {"pd_hccn_conf": pd_hccn_conf}
