# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_release_findings
short_description: The preflight's release findings, and whether a release keeps a dense model's DP rank
version_added: "1.0.0"
description:
  - This file holds two filters. C(pd_release_findings) - the release findings of one cluster (C(UnsupportedRelease),
    C(ReleaseMismatch)) from one dict per engine host and kind (O(_input); the C(vllm_pd_release) the module
    M(vllm_pd.ascend.pd_host_read) read), by the release table (plugins/module_utils/common/releases.py).
  - C(pd_dense_keeps_rank) - whether vLLM keeps a dense model's data parallel rank at a release.
options:
  _input:
    description:
      - For C(pd_release_findings) the engines list, each with C(host), C(kind), C(vllm_ascend), C(vllm), C(python)
        and C(error); for C(pd_dense_keeps_rank) the release (a string, empty when unknown).
    type: raw
    required: true
  cluster:
    description: C(pd_release_findings) only - the cluster, for the messages.
    type: str
  inventory_version:
    description: C(pd_release_findings) only - C(vllm_pd_vllm_ascend_version) when set, compared with what runs.
    type: str
  env:
    description: C(pd_dense_keeps_rank) only - the engine environment (V(vllm_pd_engine_env)).
    type: dict
"""

EXAMPLES = r"""
- name: The release findings of this cluster
  ansible.builtin.debug:
    msg: "{{ [{'host': 'p1', 'kind': 'prefill', 'vllm_ascend': '0.13.0', 'vllm': '0.13.0'}]
      | vllm_pd.ascend.pd_release_findings(cluster='c1') }}"
# -> [{'name': 'UnsupportedRelease', 'message': '[UnsupportedRelease] cluster c1, host p1 prefill: vllm-ascend 0.13.0 is refused: ...'}]
"""

RETURN = r"""
_value:
  description:
    - C(pd_release_findings) - a list of dicts with C(name) and C(message).
    - C(pd_dense_keeps_rank) - a bool.
  type: raw
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases


def pd_release_findings(engines, cluster='', inventory_version=None):
    return releases.installed_findings(cluster, list(engines or []), inventory_version or None)


def pd_dense_keeps_rank(version, env=None):
    try:
        return releases.dense_dp_keeps_rank(version or '', env or {})
    except ValueError:
        return False  # not a version: the preflight names it (UnsupportedRelease)


class FilterModule(object):
    def filters(self):
        return {'pd_release_findings': pd_release_findings, 'pd_dense_keeps_rank': pd_dense_keeps_rank}
