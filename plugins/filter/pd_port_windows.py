# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_port_windows
short_description: The reserved port windows of an engine, from its environment, as kv_port_group options
version_added: "1.0.0"
description:
  - The port windows the Ascend transports of a vLLM engine bind from, decided by the engine environment
    of the host (V(prefill_env), V(decode_env) or V(vllm_pd_engine_env)), the same function the start guard,
    the doctor and the inventory's monitoring-port check call (C(port_windows.reserved_windows)).
  - C(ASCEND_BASE_PORT) (default V(20000)) starts the AscendDirectTransport (ADXL) window.
  - C(MC_MIN_RPC_PORT) and C(MC_MAX_RPC_PORT) (default V(15000) and V(17000); Mooncake v0.3.9 reads the
    misspelled C(MC_MIN_PRC_PORT)/C(MC_MAX_PRC_PORT), honoured too) bound the Transfer Engine RPC range.
  - C(HCCL_IF_BASE_PORT) (default V(60000)) and the next 31 ports are HCCL's.
  - A value that is not a port is an error naming the variable and O(hostname).
options:
  _input:
    description: The engine environment (a mapping of environment variables).
    type: dict
    required: true
  hostname:
    description: Inventory name, used in error messages.
    type: str
"""

EXAMPLES = r"""
- name: Check a prefill group against the windows of this host's engine environment
  vllm_pd.ascend.kv_port_group: "{{ {'state': 'free', 'kv_port': 28002, 'tp_size': 8}
    | combine(prefill_env | vllm_pd.ascend.pd_port_windows(hostname=inventory_hostname)) }}"
# {MC_MIN_RPC_PORT: "40000", MC_MAX_RPC_PORT: "41000"} -> {ascend_base_port: 20000, te_rpc_range: [40000, 41000],
#                                                          hccl_range: [60000, 60031]}
"""

RETURN = r"""
_value:
  description: C(ascend_base_port), C(te_rpc_range) and C(hccl_range) (first and last port), as O(vllm_pd.ascend.kv_port_group#module:ascend_base_port)
    and its siblings take them.
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_windows import reserved_windows


def pd_port_windows(env, hostname="this host"):
    if env is None:
        env = {}
    if not isinstance(env, Mapping):
        raise AnsibleFilterError("host %s: the engine environment must be a mapping, got %s" % (hostname, type(env).__name__))
    try:
        w = reserved_windows(dict((str(k), v) for k, v in env.items()), npu_count=0)
    except ValueError as exc:
        raise AnsibleFilterError("host %s: %s. Fix: correct it in vllm_pd_engine_env (or prefill_env / decode_env)"
                                 % (hostname, exc))
    return {"ascend_base_port": w["ascend_base_port"], "te_rpc_range": list(w["te_rpc"]),
            "hccl_range": list(w["hccl"])}


class FilterModule(object):
    def filters(self):
        return {"pd_port_windows": pd_port_windows}
