# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_proxy_members
short_description: What to add to and remove from a running proxy so its members are the inventory's
version_added: "1.2.0"
description:
  - C(pd_proxy_members) compares the member lists of the vllm-ascend example proxy's C(/instances/add) or C(/instances/remove) answer
    with the instances the inventory wants behind it (V(localhost) and V(127.0.0.1) count as V(0.0.0.0), as the
    proxy compares them).
  - C(pd_proxy_unexplained) - the members of the answer (or command line, or the C(live) lists of
    C(pd_proxy_members)) whose address is no address of an inventory host of the cluster (O(known)), C(OrphanInstance).
  - C(pd_proxy_view) - the doctor's view, C(missing), C(extra) and C(draining) (listed, their host has
    C(vllm_pd_state) absent), each with a prefill and a decode list, of the proxy's answer, or of the words of a proxy
    command line (a proxy without the admin API serves what its command line names).
options:
  _input:
    description:
      - The proxy's JSON answer (C(current_prefill_instances), C(current_decode_instances)); for C(pd_proxy_view) also
        a list, the proxy's command line.
    type: raw
    required: true
  desired:
    description: C(pd_proxy_members), C(pd_proxy_view) - the members the inventory wants, a C(prefill) and a C(decode)
      list of C(host:port).
    type: dict
  keep:
    description: C(pd_proxy_members) only - members that are not removed while listed (host:port).
    type: list
    elements: str
  known:
    description: C(pd_proxy_unexplained) only - the addresses of the cluster's inventory hosts.
    type: list
    elements: str
  retiring:
    description: C(pd_proxy_view) only - the members of hosts with C(vllm_pd_state) absent (host:port).
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Plan the membership change
  ansible.builtin.debug:
    msg: "{{ answer.json | vllm_pd.ascend.pd_proxy_members({'prefill': ['10.0.0.1:8100'], 'decode': ['10.0.0.2:8200']}) }}"
"""

RETURN = r"""
_value:
  description:
    - C(pd_proxy_members) - C(live) (the proxy's lists), C(add) and C(remove) (each a C(prefill) and a C(decode)
      list), C(changed).
    - C(pd_proxy_view) - C(missing), C(extra), C(draining).
    - C(pd_proxy_unexplained) - a C(prefill) and a C(decode) list.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.proxy_members import (
    doctor_view, live_members, plan, unexplained, unit_members)


def _live(answer):
    try:
        return unit_members(answer) if isinstance(answer, list) else live_members(answer)
    except ValueError as exc:
        raise AnsibleFilterError('the proxy answered no member lists (%s): is proxy_admin_api right for it?' % exc)


def pd_proxy_members(answer, desired, keep=None):
    live = _live(answer)
    return dict(plan(live, desired, list(keep or [])), live=live)


def pd_proxy_unexplained(answer, known):
    # also the lists pd_proxy_members returns as live
    live = answer if isinstance(answer, dict) and 'prefill' in answer and 'decode' in answer else _live(answer)
    return unexplained(live, [str(a) for a in known or []])


def pd_proxy_view(answer, desired, retiring=None):
    return doctor_view(_live(answer), desired, retiring or [])


class FilterModule(object):
    def filters(self):
        return {"pd_proxy_members": pd_proxy_members, "pd_proxy_view": pd_proxy_view,
                "pd_proxy_unexplained": pd_proxy_unexplained}
