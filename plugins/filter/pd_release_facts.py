# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_release_facts
short_description: The release table's facts of one vllm-ascend release
version_added: "1.1.0"
description:
  - Returns the entry of the release table (plugins/module_utils/common/releases.py) for a vllm-ascend version,
    looked up by its exact release, else its base release; an empty dict for an empty or unknown version.
  - With O(newest=true), an empty, unknown or malformed version gives the newest supported release's facts (the
    routes, keys, names and log lines the roles talk to upstream with, defined once in the table).
options:
  _input:
    description: The vllm-ascend version, e.g. V(0.23.0.post1) or V(v0.18.0); empty for none.
    type: str
    required: true
  newest:
    description: Fall back to the newest supported release instead of an empty dict (and of an error).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: What the example proxy of the deployed release needs
  ansible.builtin.set_fact:
    proxy_needs: "{{ (vllm_pd_vllm_ascend_version | default('') | vllm_pd.ascend.pd_release_facts).proxy_imports | default([]) }}"
"""

RETURN = r"""
_value:
  description: The release's facts (proxy_python, proxy_imports, proxy_routes, proxy_readd, ...), or an empty dict.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases


def pd_release_facts(version, newest=False):
    if newest:
        return dict(releases.runtime(str(version) if version else ''))
    if not version:
        return {}
    try:
        entry = releases.find(str(version))
    except ValueError as exc:
        raise AnsibleFilterError("vllm_pd_vllm_ascend_version: %s" % exc)
    return dict(entry) if entry else {}


class FilterModule(object):
    def filters(self):
        return {"pd_release_facts": pd_release_facts}
