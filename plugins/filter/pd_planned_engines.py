# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_planned_engines
short_description: The planned engines of a cluster, as the fit and rollable checks compare them
version_added: "1.1.0"
description:
  - One dict per host of C(vllm_pd_prefill), then of C(vllm_pd_decode), whose C(vllm_pd_cluster) is O(cluster).
  - Each has C(host), C(kind), C(tp) (C(vllm_pd_KIND_tp_size)), C(dp), C(pp), C(pcp) (of the host's first instance of
    that kind, null without one), C(kv_connector_extra), C(model_path) (C(KIND_model), else C(vllm_pd_model)),
    C(address), C(model) (C(vllm_pd_model_facts)), C(model_read) (whether this run read that host's model; a host
    outside C(--limit) was not, and its unknown C(max_model_len) is not compared), C(env) (C(KIND_env), else C(vllm_pd_engine_env), secret values
    hidden as C(pd_redact_env) does) and C(settings) (C(pd_settings) of the typed variables, C(KIND_NAME) else
    C(vllm_pd_NAME), and the extra args C(KIND_extra_args) else C(vllm_pd_extra_args)).
extends_documentation_fragment:
  - vllm_pd.ascend.inventory_view
  - vllm_pd.ascend.inventory_view.cluster
"""

EXAMPLES = r"""
- name: The fit findings of this host's cluster
  ansible.builtin.debug:
    msg: "{{ hostvars | vllm_pd.ascend.pd_planned_engines(groups=groups, cluster=vllm_pd_cluster) | vllm_pd.ascend.pd_fit_findings }}"
"""

RETURN = r"""
_value:
  description: One dict per engine host and kind.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.model.cluster_engines import planned_engines


def pd_planned_engines(hostvars, groups, cluster):
    try:
        return planned_engines(groups, hostvars, cluster)
    except TypeError as exc:
        # the preflight's inventory check names the variable; here only the type may be shown
        raise AnsibleFilterError("pd_redact_env: %s" % exc)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"pd_planned_engines": pd_planned_engines}
