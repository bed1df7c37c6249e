# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_release_findings
short_description: The preflight's release findings, and what a read release implies (dense DP rank, --shutdown-timeout)
version_added: "1.0.0"
description:
  - This file holds three filters. C(pd_release_findings) - the release findings of one cluster (C(UnsupportedRelease),
    C(ReleaseMismatch)) from one dict per engine host and kind (O(_input); the C(vllm_pd_release) the module
    M(vllm_pd.ascend.pd_host_read) read), by the release table (plugins/module_utils/common/releases.py).
  - C(pd_dense_keeps_rank) - whether vLLM keeps a dense model's data parallel rank at a release.
  - C(pd_serve_has_shutdown_timeout) - whether C(vllm serve) of one read engine kind has C(--shutdown-timeout), by the
    release table; null when the table cannot say (the engine role then reads C(vllm serve --help=all)).
options:
  _input:
    description:
      - For C(pd_release_findings) the engines list, each with C(host), C(kind), C(vllm_ascend), C(vllm), C(python)
        and C(error); for C(pd_dense_keeps_rank) the release (a string, empty when unknown); for
        C(pd_serve_has_shutdown_timeout) one kind of C(vllm_pd_release) (C(vllm_ascend), C(vllm); empty when not read).
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

- name: Whether this host's prefill vllm serve has --shutdown-timeout, by the release table
  ansible.builtin.debug:
    msg: "{{ {'vllm_ascend': '0.18.0', 'vllm': '0.18.0'} | vllm_pd.ascend.pd_serve_has_shutdown_timeout }}"
# -> true (null for a release the table cannot answer for)
"""

RETURN = r"""
_value:
  description:
    - C(pd_release_findings) - a list of dicts with C(name) and C(message).
    - C(pd_dense_keeps_rank) - a bool.
    - C(pd_serve_has_shutdown_timeout) - a bool, or null when the table cannot say.
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


def pd_serve_has_shutdown_timeout(installed):
    installed = installed or {}
    return releases.serve_has_shutdown_timeout(installed.get('vllm_ascend'), installed.get('vllm'))


class FilterModule(object):
    def filters(self):
        return {'pd_release_findings': pd_release_findings, 'pd_dense_keeps_rank': pd_dense_keeps_rank,
                'pd_serve_has_shutdown_timeout': pd_serve_has_shutdown_timeout}
