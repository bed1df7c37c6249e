# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_ignore_checks
short_description: Validate vllm_pd_ignore_checks against the names of the preflight's checks
version_added: "1.1.0"
description:
  - Returns the list unchanged when every name is a check of the preflight that may be ignored; else fails
    naming the variable, the host, the wrong names and listing the valid ones.
options:
  _input:
    description: The value of V(vllm_pd_ignore_checks).
    type: list
    elements: str
    required: true
  hostname:
    description: Inventory name, for the message.
    type: str
"""

EXAMPLES = r"""
- name: The checks this host turns into warnings
  ansible.builtin.set_fact:
    ignored: "{{ vllm_pd_ignore_checks | default([]) | vllm_pd.ascend.pd_ignore_checks(hostname=inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: The names.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.check_names import validate_ignore


def pd_ignore_checks(names, hostname="this host"):
    err = validate_ignore(names)
    if err:
        raise AnsibleFilterError("host %s: %s. Fix: correct vllm_pd_ignore_checks" % (hostname, err))
    return list(names or [])


class FilterModule(object):
    def filters(self):
        return {"pd_ignore_checks": pd_ignore_checks}
