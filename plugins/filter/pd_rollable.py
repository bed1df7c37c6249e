# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_rollable
short_description: Refuse a change of a running cluster that P and D must share (ChangeNotRollable)
version_added: "1.2.0"
description:
  - C(pd_launch) - the launch settings of a running engine from the words of its command line and its environment
    (C(model), C(tp), C(pp), C(pcp), C(settings), C(kv_extra), C(kv_role), C(env), C(error)); null when it is no
    C(vllm serve) command line.
  - C(pd_orphan_units) - the vllm_pd units of a host (O(_input), C(systemctl list-units) lines) that no planned
    instance (O(planned_units)) or the cluster's proxy (O(is_proxy)) explains, C(OrphanInstance).
  - C(pd_rollable) - the C(ChangeNotRollable) finding of one cluster when the plan changes, for a running engine,
    something P and D share - block size, kv_cache_dtype, dtype, quantization, speculative config, the model files,
    its tp, pp or pcp size, or any key of its C(kv_connector_extra_config) (each side's tp, dp and pp sizes, the
    user's own keys); empty with O(allow_downtime) (the change stops the cluster).
options:
  _input:
    description:
      - C(pd_launch) - the argv words of the engine process.
      - C(pd_orphan_units) - the unit lines.
      - C(pd_rollable) - the running engines, C(pd_launch) of each with C(host), C(kind) and C(unit).
    type: raw
    required: true
  environ:
    description: C(pd_launch) only - the process environment.
    type: dict
  planned:
    description:
      - C(pd_rollable) only - the planned engines, C({host, kind, model_path, tp, dp, pp, pcp, settings,
        kv_connector_extra}) each (C(kv_connector_extra) - the host's V(vllm_pd_kv_connector_extra)); a size or
        C(kv_connector_extra) left out is not compared.
    type: list
    elements: dict
  planned_units:
    description: C(pd_orphan_units) only - the units of the host's planned instances.
    type: list
    elements: str
  is_proxy:
    description: C(pd_orphan_units) only - the host runs its cluster's proxy.
    type: bool
    default: false
  allow_downtime:
    description: C(pd_rollable) only - the operator accepts a stop-the-cluster change.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Refuse what cannot roll
  ansible.builtin.debug:
    msg: "{{ running | vllm_pd.ascend.pd_rollable(planned=planned) }}"
"""

RETURN = r"""
_value:
  description:
    - C(pd_launch) - a dict, or null.
    - C(pd_orphan_units) - a list of unit names.
    - C(pd_rollable) - a list of at most one dict with C(name), C(attributes) and C(message).
  type: raw
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_launch
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import orphans
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import rollable


def pd_launch(argv, environ=None):
    return doctor_launch.parse_launch(argv, environ or {})


def pd_orphan_units(unit_lines, planned_units, is_proxy=False):
    return orphans.orphan_units(list(unit_lines or []), list(planned_units or []), bool(is_proxy))


def pd_rollable(running, planned, allow_downtime=False):
    return rollable.findings(list(running or []), list(planned or []), allow_downtime)


class FilterModule(object):
    def filters(self):
        return {"pd_launch": pd_launch, "pd_orphan_units": pd_orphan_units, "pd_rollable": pd_rollable}
