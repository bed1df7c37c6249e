# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_requests_served
short_description: The requests a decode host's engines finished between two reads of their /metrics
version_added: "1.1.0"
description:
  - Takes two registered results of an M(ansible.builtin.uri) loop over the host's decode instances'
    C(/metrics) (with C(return_content)), the first read before the measured run and the second after it, and
    returns how many requests they finished in between (C(vllm:request_success_total), every C(finished_reason)).
  - Returns V(null) (unknown) when a read was skipped or failed, the two loops differ, or a counter went back
    (an engine restarted in between).
options:
  _input:
    description: The registered result of the read before the run.
    type: dict
    required: true
  after:
    description: The registered result of the read after the run.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Requests this decode host served during the run
  ansible.builtin.debug:
    msg: "{{ __served_before | vllm_pd.ascend.pd_requests_served(__served_after) }}"
"""

RETURN = r"""
_value:
  description: The number of requests, or V(null) when unknown.
  type: int
"""

from collections.abc import Mapping

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.bench_kv import requests_served


def _texts(registered):
    if not isinstance(registered, Mapping) or registered.get('skipped'):
        return []
    return [r.get('content') if isinstance(r, Mapping) and r.get('status') == 200 else None
            for r in registered.get('results') or []]


def pd_requests_served(before, after):
    return requests_served(_texts(before), _texts(after))


class FilterModule(object):
    def filters(self):
        return {"pd_requests_served": pd_requests_served}
