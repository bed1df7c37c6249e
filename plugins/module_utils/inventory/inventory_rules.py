# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every cluster-wide rule of the inventory, as pure functions (the preflight runs them once,
on the controller, before any host is touched; filter pd_inventory_errors builds the view).

The view is plain data: {"groups": {group: [host, ...]}, "hosts": {host: {variable: value}},
"broken": [[host, variable, why], ...], "rollout": "parallel"}; a variable the inventory does not
define is absent. The reserved port windows come from each host's engine env
(port_windows.reserved_windows). Each rule takes a ClusterView and yields Findings. To add a rule, write
``def rule_x(view): yield Finding(...)`` in the rules_*.py module of its concern and append it to RULES:
nothing else changes.

This module is the entry point (VARIABLES, RULES, inventory_findings, inventory_errors); the rules live by
concern in rules_view.py (ClusterView, Finding, shared helpers), rules_cluster.py (groups, clusters,
machines, required variables, numbers), rules_releases.py, rules_runtime.py (systemd/container, argv words),
rules_env.py (engine env, secrets, API key), rules_parallel.py (pp/pcp, external DP, tp ratio),
rules_ports.py (windows, host layout, monitoring ports), rules_proxy.py (proxy, benchmark) and
rules_state.py (day-2 vllm_pd_state, --limit).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import bench_settings
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import monitoring_ports as M
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_cluster import (
    CONNECTION_VARS, COUNT_VARS, PORT_VARS, SECONDS_VARS, rule_cluster_agrees, rule_cluster_groups,
    rule_cluster_name, rule_cluster_sides, rule_groups, rule_numbers, rule_required, rule_same_machine,
    rule_unevaluable,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_env import ENV_VARS, rule_api_key, rule_engine_env, rule_secret_env_names
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_parallel import rule_external_dp, rule_parallel_sizes, rule_tp_ratio
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_ports import (
    rule_group_windows, rule_host_layout, rule_monitoring_ports, rule_port_windows,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_proxy import FRONT_VARS, rule_benchmark, rule_proxy, rule_proxy_front
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_releases import rule_vllm_ascend_version
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_runtime import (
    ARGV_LIST_VARS, EXEC_VARS, MAPPING_VARS, WORD_VARS, rule_argv_words, rule_runtime, rule_stop_services,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_state import rule_limit, rule_state
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_view import ClusterView, Finding

# the entry points of the callers (filter pd_inventory_errors, the tests' own rules build Findings)
__all__ = ["VARIABLES", "RULES", "ClusterView", "Finding", "inventory_findings", "inventory_errors"]

# Every variable a rule reads (the filter copies only these out of hostvars).
VARIABLES = tuple(sorted(set(
    ("vllm_pd_cluster", "vllm_pd_model", "vllm_pd_host_ip", "vllm_pd_network", "vllm_pd_interface",
     "vllm_pd_stop_services", "vllm_pd_runtime", "vllm_pd_container_engine", "vllm_pd_proxy_enabled",
     "prefill_runtime", "decode_runtime", "prefill_container_engine", "decode_container_engine",
     "vllm_pd_prefill_dp_ranks", "vllm_pd_decode_dp_ranks", "prefill_devices", "decode_devices",
     "vllm_pd_vllm_ascend_version", "vllm_pd_state", "vllm_pd_secret_env_names", M.VARIABLE)
    + PORT_VARS + COUNT_VARS + SECONDS_VARS + ARGV_LIST_VARS + WORD_VARS + EXEC_VARS + ENV_VARS + MAPPING_VARS
    + CONNECTION_VARS + FRONT_VARS + tuple(bench_settings.SETTINGS) + bench_settings.OTHER_SETTINGS)))


# The order findings are reported in. Later cluster-wide checks (P/D consistency) go here.
RULES = [
    rule_groups, rule_unevaluable, rule_cluster_name, rule_cluster_groups, rule_same_machine,
    rule_required, rule_numbers, rule_vllm_ascend_version, rule_stop_services, rule_runtime, rule_argv_words, rule_engine_env,
    rule_port_windows, rule_parallel_sizes, rule_secret_env_names, rule_host_layout, rule_group_windows, rule_monitoring_ports,
    rule_cluster_sides, rule_cluster_agrees, rule_api_key, rule_external_dp, rule_tp_ratio, rule_proxy, rule_proxy_front, rule_benchmark,
    rule_state, rule_limit,
]


def inventory_findings(data, rules=None):
    """All Findings of the inventory DATA (see the module docstring), in RULES order, without repeats."""
    view = data if isinstance(data, ClusterView) else ClusterView(data)
    out, seen = [], set()
    for rule in RULES if rules is None else rules:
        for f in rule(view):
            if f.text not in seen:
                seen.add(f.text)
                out.append(f)
    return out


def inventory_errors(data, rules=None):
    """The findings as dicts (cluster, host, variable, message, fix, text)."""
    return [f.as_dict() for f in inventory_findings(data, rules)]
