# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_inventory_errors
short_description: Every error of a PD inventory, found on the controller before any host is touched
version_added: "1.0.0"
description:
  - Reads only inventory variables (no facts) of the hosts in groups C(vllm_pd_prefill), C(vllm_pd_decode)
    and C(vllm_pd_proxy), and runs every cluster-wide rule of the collection on them
    (C(plugins/module_utils/inventory/inventory_rules.py), which lists them from its C(rules_*.py) modules).
  - Each error names the cluster (V(*) when it concerns the whole rollout), the host, the variable,
    what is wrong and the fix.
  - Covers missing and mistyped variables, ports outside 1-65535, port groups and NPU layouts that
    collide, external DP ranks, container runtime settings, argv words with control characters,
    C(--api-key) on the command line, environment variables that are not names or override the
    pinned address, a host in two clusters, two inventory hosts on one machine and a cluster
    without a proxy host (unless V(vllm_pd_proxy_enabled=false)).
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  groups:
    description: C(groups), the inventory's groups and their hosts.
    type: dict
    required: true
  rollout:
    description: The rollout policy (V(vllm_pd_rollout)).
    type: str
    default: parallel
  targeted:
    description:
      - The hosts this run targets (C(ansible_play_hosts_all), after C(--limit)); omitted, every host counts as targeted.
      - A decode host targeted without the prefill hosts of its cluster, or the proxy host without every engine host
        of its cluster, is an error; the decode side proves it reaches every prefill port group, the proxy lists every
        engine, and a host outside C(--limit) is not planned.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Collect the inventory errors of every cluster
  ansible.builtin.set_fact:
    inventory_errors: "{{ hostvars | vllm_pd.ascend.pd_inventory_errors(groups, rollout=vllm_pd_rollout | default('parallel'),
      targeted=ansible_play_hosts_all) }}"
  run_once: true
# -> [{cluster: b, host: npu-p11, variable: vllm_pd_extra_args, message: ..., fix: ...,
#      text: "cluster b, host npu-p11: vllm_pd_extra_args passes --api-key ... Fix: ..."}]
"""

RETURN = r"""
_value:
  description:
    - One dict per error, in the order of the rules; empty when the inventory is consistent.
    - C(cluster) (V(*) for the whole rollout), C(host) (may be empty), C(variable), C(message), C(fix)
      and C(text) (all of it in one sentence, for people).
  type: list
  elements: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from jinja2 import Undefined

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.inventory_rules import VARIABLES, inventory_errors


def _plain(value):
    """Plain Python data (lazy templated containers and tagged scalars of ansible-core become builtins).
    An undefined value (ansible-core 2.19 hands back a marker instead of raising) raises."""
    if isinstance(value, Undefined):
        # jinja2's own way to the message of an undefined value
        try:
            value._fail_with_undefined_error()  # pylint: disable=protected-access
        except Exception as exc:  # pylint: disable=broad-except
            raise ValueError(str(exc))
        raise ValueError("undefined")
    if isinstance(value, Mapping):
        return dict((_plain(k), _plain(v)) for k, v in value.items())
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    return value


def cluster_view(hostvars, groups, rollout="parallel", targeted=None):
    """The view inventory_rules reads: only its VARIABLES of the PD hosts, each templated on its own
    so one broken variable is reported by name instead of failing the whole validation."""
    groups = dict((str(k), [str(h) for h in (v or [])]) for k, v in (groups or {}).items())
    pd_hosts = []
    for g in ("vllm_pd_prefill", "vllm_pd_decode", "vllm_pd_proxy"):
        pd_hosts += [h for h in groups.get(g, []) if h not in pd_hosts]
    hosts, broken = {}, []
    for h in pd_hosts:
        hv = hostvars[h]
        mine = hosts.setdefault(h, {})
        for var in VARIABLES:
            if var not in hv:
                continue
            # any templating error (or an undefined value) is reported by name
            try:
                mine[var] = _plain(hv[var])
            except Exception as exc:  # pylint: disable=broad-except
                broken.append([h, var, str(exc).splitlines()[0] if str(exc) else type(exc).__name__])
    return {"groups": groups, "hosts": hosts, "broken": broken, "rollout": _plain(rollout),
            "targeted": None if targeted is None else [str(h) for h in targeted]}


def pd_inventory_errors(hostvars, groups, rollout="parallel", targeted=None):
    if not isinstance(hostvars, Mapping) or not isinstance(groups, Mapping):
        raise AnsibleFilterError("pd_inventory_errors takes hostvars as input and groups as its argument")
    return inventory_errors(cluster_view(hostvars, groups, rollout, targeted))


class FilterModule(object):
    def filters(self):
        return {"pd_inventory_errors": pd_inventory_errors}
