# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_rolling_batches
short_description: Plan a rolling change (vllm_pd_rollout=rolling) and refuse a cluster that cannot roll
version_added: "1.2.0"
description:
  - C(pd_rolling_batches) - the hosts that change together, batch by batch (O(_input) the C({host, cluster, role}) of
    every host that stays, in inventory order); per cluster the prefill hosts, then the decode hosts, the first batch
    of each role one host (the canary), then O(batch_size) hosts, never every host of a role; clusters side by side.
  - C(pd_rolling_findings) - the C(RollingNotPossible) finding of one running cluster (O(_input) its name) whose proxy
    has no admin API or which has fewer than two hosts of a role.
options:
  _input:
    description:
      - C(pd_rolling_batches) - the hosts, C({host, cluster, role}) each.
      - C(pd_rolling_findings) - the cluster name.
    type: raw
    required: true
  batch_size:
    description: C(pd_rolling_batches) only - hosts of a role of a cluster per batch after the canary.
    type: int
    default: 1
  hosts:
    description: C(pd_rolling_findings) only - C({prefill, decode}) host lists of the cluster.
    type: dict
  running:
    description: C(pd_rolling_findings) only - an engine of the cluster runs now.
    type: bool
  admin_api:
    description: C(pd_rolling_findings) only - the cluster's proxy has C(/instances/add) and C(/instances/remove).
    type: bool
  restarting:
    description:
      - C(pd_rolling_findings) only - the roles (V(prefill), V(decode)) whose running engines the change restarts;
        only those need a second host. Unset counts both.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Plan the batches
  ansible.builtin.debug:
    msg: "{{ [{'host': 'p1', 'cluster': 'a', 'role': 'prefill'}] | vllm_pd.ascend.pd_rolling_batches(batch_size=2) }}"
"""

RETURN = r"""
_value:
  description:
    - C(pd_rolling_batches) - a list of batches, each a list of C({host, role}).
    - C(pd_rolling_findings) - a list of at most one dict with C(name) and C(message).
  type: list
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import rolling


def pd_rolling_batches(hosts, batch_size=1):
    return rolling.batches(list(hosts or []), int(batch_size))


def pd_rolling_findings(cluster, hosts, running, admin_api, restarting=None):
    return rolling.findings(str(cluster), dict(hosts or {}), bool(running), bool(admin_api),
                            None if restarting is None else list(restarting))


class FilterModule(object):
    def filters(self):
        return {"pd_rolling_batches": pd_rolling_batches, "pd_rolling_findings": pd_rolling_findings}
