# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_restore_plan
short_description: What to put back of the holders the preflight stopped, from /etc/vllm-pd/stopped-services
version_added: "1.1.0"
description:
  - Reads the record the preflight writes when O(vllm_pd.ascend.kv_port_group#module:stop_services) allowed it to
    stop a unit or container (one JSON object a line; the older format of one unit name, or
    C(container:ENGINE:NAME), a line is read too, as "was running, enablement unchanged").
  - Returns the actions of C(stop_pd.yml -e vllm_pd_restore_services=true), in order, the socket units before the
    service they start; the first record of a name wins (the oldest, the state before PD).
  - A unit is enabled again only when it was V(enabled) (or V(enabled-runtime)) before, and started only when it
    was active. A container gets its restart policy back only when the preflight changed it, and is started when
    it was running.
options:
  _input:
    description: The text of C(/etc/vllm-pd/stopped-services).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Plan the restore
  ansible.builtin.debug:
    msg: "{{ (record.content | b64decode) | vllm_pd.ascend.pd_restore_plan }}"
"""

RETURN = r"""
_value:
  description:
    - Actions; a unit action has C(kind=unit), C(name), C(enable), C(runtime) (enable with C(--runtime)), C(start);
      a container action C(kind=container), C(engine), C(name), C(restart_policy) (null to leave it), C(start).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.holders import parse_record, restore_plan


def pd_restore_plan(text):
    try:
        return restore_plan(parse_record(text))
    except ValueError as exc:
        raise AnsibleFilterError('/etc/vllm-pd/stopped-services: %s; fix or remove that line' % exc)


class FilterModule(object):
    def filters(self):
        return {"pd_restore_plan": pd_restore_plan}
