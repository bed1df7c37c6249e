# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_fit_findings
short_description: Settings P and D launch with, and the findings when they do not fit together
version_added: "1.0.0"
description:
  - This file holds four filters. C(pd_settings) - the effective checked settings of one engine, from the typed variables
    (O(_input), a dict of C(served_model_name), C(dtype), C(kv_cache_dtype), C(block_size), C(max_model_len),
    C(quantization), C(speculative_config)) and the words of its extra args that set one of them (C(--block-size 128) or
    C(--block-size=128); the extra args come later on the command line, so they win).
  - C(pd_setting_args) - the C(vllm serve) argv words of the typed settings that are set.
  - C(pd_fit_findings) - the named findings of one cluster (C(ModelMismatch), C(BlockSizeMismatch), C(KvCacheDtypeMismatch),
    C(SpecDecodeMismatch), C(MaxModelLenMismatch), C(TpNotMultiple), C(IntraRoceMissing), C(EngineEnvMismatch), ...)
    from one dict per engine host and kind, each naming both values and both hosts. A finding with C(warning) true
    (C(TransferTimeoutShort), ASCEND_TRANSFER_TIMEOUT not above the RDMA retransmission budget) does not refuse.
  - C(pd_abort_timeout_names) - the abort-timeout variable(s) the Mooncake connector of the vllm-ascend release O(_input)
    reads - C(VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT) from v0.18.0, C(VLLM_NIXL_ABORT_REQUEST_TIMEOUT) before; both when
    the release is empty or null (unknown).
options:
  _input:
    description:
      - For C(pd_settings) and C(pd_setting_args) the typed settings dict; for C(pd_fit_findings) the engines list;
        for C(pd_abort_timeout_names) the release (C(vllm_pd_vllm_ascend_version)), e.g. C(v0.23.0).
    type: raw
    required: true
  extra_args:
    description: C(pd_settings) only - the engine's extra argv words.
    type: list
    elements: str
  where:
    description: C(pd_settings) only - host and kind for error messages.
    type: str
"""

EXAMPLES = r"""
- name: What P launches with
  ansible.builtin.set_fact:
    p_settings: "{{ {'block_size': 128} | vllm_pd.ascend.pd_settings(extra_args=['--block-size=64']) }}"
# -> block_size 64, block_size_source 'extra args --block-size'

- name: The abort-timeout variable of vllm-ascend v0.13.0
  ansible.builtin.debug:
    msg: "{{ 'v0.13.0' | vllm_pd.ascend.pd_abort_timeout_names }}"
# -> ['VLLM_NIXL_ABORT_REQUEST_TIMEOUT']
"""

RETURN = r"""
_value:
  description:
    - C(pd_settings) - a dict of the settings (null when unset) and NAME_source (the variable or flag that set it).
    - C(pd_setting_args) - a list of argv words.
    - C(pd_fit_findings) - a list of dicts with C(name), C(message), C(hosts) and, for a warning, C(warning) true.
    - C(pd_abort_timeout_names) - a list of variable names.
  type: raw
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import engine_env
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import pd_consistency


def pd_settings(typed, extra_args=None, where="this host"):
    try:
        return pd_consistency.effective_settings(typed, extra_args, where)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def pd_setting_args(typed):
    try:
        return pd_consistency.setting_args(typed)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def pd_fit_findings(engines):
    return pd_consistency.cluster_findings(list(engines or []))


def pd_abort_timeout_names(version):
    try:
        return engine_env.abort_timeout_names(version)
    except ValueError as exc:
        raise AnsibleFilterError("vllm_pd_vllm_ascend_version: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"pd_settings": pd_settings, "pd_setting_args": pd_setting_args, "pd_fit_findings": pd_fit_findings,
                "pd_abort_timeout_names": pd_abort_timeout_names}
