# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_release_read
short_description: The vllm-ascend release installed in each engine's Python, and the preflight's release findings
version_added: "1.0.0"
description:
  - This file holds four filters. C(pd_release_read) - the release each engine kind of a host runs, from the results of
    the engine role's read (O(_input), the registered loop results of C(roles/engine/tasks/release.yml)); a dict by
    kind (C(prefill), C(decode)) of C(vllm_ascend), C(vllm), C(python) and C(error).
  - C(pd_release_findings) - the release findings of one cluster (C(UnsupportedRelease), C(ReleaseMismatch)) from one
    dict per engine host and kind (O(_input)), by the release table (plugins/module_utils/common/releases.py).
options:
  _input:
    description:
      - For C(pd_release_read) the loop results (each with C(item.kinds), C(rc), C(stdout), C(stderr)); for
        C(pd_release_findings) the engines list, each with C(host), C(kind), C(vllm_ascend), C(vllm), C(python) and
        C(error); for
        C(pd_dense_keeps_rank) the release (a string, empty when unknown); for C(pd_serve_has_shutdown_timeout) one
        kind of C(pd_release_read) (C(vllm_ascend), C(vllm); empty when not read).
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
    - C(pd_release_read) - a dict per engine kind of C(vllm_ascend), C(vllm) (null when not installed), C(python) and
      C(error) (why nothing could be read, else null).
    - C(pd_release_findings) - a list of dicts with C(name) and C(message).
    - C(pd_dense_keeps_rank) - a bool.
    - C(pd_serve_has_shutdown_timeout) - a bool, or null when the table cannot say.
  type: raw
"""

import json

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases


def pd_release_read(results):
    out = {}
    for r in results or []:
        item = r.get('item') or {}
        record = dict(vllm_ascend=None, vllm=None, python=None, error=None, where=item.get('key'))
        text = (r.get('stdout') or '').strip().splitlines()
        try:
            found = json.loads(text[-1]) if r.get('rc') == 0 and text else None
        except ValueError:
            found = None
        if isinstance(found, dict):
            record.update(vllm_ascend=found.get('vllm-ascend'), vllm=found.get('vllm'), python=found.get('python'))
        else:
            why = (r.get('stderr') or r.get('msg') or '').strip()[-300:]
            record['error'] = '`%s` (rc %s): %s' % (item.get('key'), r.get('rc'), why or (r.get('stdout') or '').strip()[-300:])
        for kind in item.get('kinds') or []:
            out[kind] = record
    return out


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
        return {'pd_release_read': pd_release_read, 'pd_release_findings': pd_release_findings,
                'pd_dense_keeps_rank': pd_dense_keeps_rank, 'pd_serve_has_shutdown_timeout': pd_serve_has_shutdown_timeout}
