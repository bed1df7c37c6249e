# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_redact_env
short_description: An engine environment with the values of its secret variables hidden
version_added: "1.1.0"
description:
  - Returns a copy of the mapping in which the value of every secret variable is V(<hidden>), so a fact, a
    message or a C(-v) result built from it shows no secret.
  - Secret are the names matching C(*_KEY), C(*_TOKEN), C(*_SECRET) or C(*PASSWORD*) (case-insensitive; so
    C(VLLM_API_KEY) and C(HF_TOKEN)), and those O(names) lists.
options:
  _input:
    description: The environment (V(vllm_pd_engine_env), V(prefill_env), V(decode_env)).
    type: dict
    required: true
  names:
    description: More secret names or shell patterns (V(vllm_pd_secret_env_names)).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: The planned environment, fit to be shown
  ansible.builtin.set_fact:
    planned_env: "{{ vllm_pd_engine_env | vllm_pd.ascend.pd_redact_env(vllm_pd_secret_env_names | default([])) }}"
"""

RETURN = r"""
_value:
  description: The mapping, secret values replaced by V(<hidden>).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.secrets import redact


def pd_redact_env(env, names=None):
    if not isinstance(env, Mapping):
        # the preflight's inventory check names the variable; here only the type may be shown
        raise AnsibleFilterError("pd_redact_env: the environment must be a mapping, not a %s" % type(env).__name__)
    return redact(dict(env), [str(n) for n in (names or []) if isinstance(n, str)])


class FilterModule(object):
    def filters(self):
        return {"pd_redact_env": pd_redact_env}
