# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Can a change of a running cluster roll, one instance at a time, with traffic kept (issue 21)?

Not when it changes what P and D must share: while it rolls, old P would send KV to new D (or the
reverse), and the VA MooncakeConnector checks no compatibility hash, so a mismatched pair is not
refused, it garbles output (shared docs day2-ops.md §3: block size on one side, vllm-ascend#14545;
speculative config changes P's layer range, #15467; D pulls each of P's pipeline stages by the
prefill.pp_size of its kv_connector_extra_config). The running engines' launch settings
(doctor_launch.parse_launch over /proc/PID/cmdline) are compared with the planned ones (the
preflight's engines list: pd_consistency.effective_settings, the plan's instances); pure functions.

What is compared, for each running engine and its host's plan:
- the launch settings of the fit rules (pd_consistency.SETTINGS) but those each engine may change alone
  (NOT_SHARED), and the model files;
- the parallel sizes it launches with (SIZES: tp, pp, pcp from its argv; the other side derives P's port
  layout and layer range from them);
- every key of its kv_connector_extra_config, which each engine carries for both sides: the sizes the plan
  writes there (KV_SIZES, as SIDE.<size>_size: those the release table says the connector reads) and the
  user's own keys (vllm_pd_kv_connector_extra).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import pd_consistency

NAME = 'ChangeNotRollable'
SIDES = ('prefill', 'decode')
# launch settings one engine may change alone: the KV layout does not depend on them
NOT_SHARED = ('served_model_name', 'max_model_len')
SHARED = tuple(name for name, _flag, _kind in pd_consistency.SETTINGS if name not in NOT_SHARED)
# parallel sizes each engine launches with (argv; the plan's instances: tp, pp, pcp)
SIZES = ('tp', 'pp', 'pcp')


def _kv_sizes():
    """The sizes kv_connector_extra_config carries for each side (SIDE.<size>_size): those the connector of any
    release reads (the release table's extra_config_keys, checked against upstream by the contract tests)."""
    found = set()
    for entry in releases.RELEASES.values():
        for key in entry.get('extra_config_keys', ()):
            side, _dot, name = key.partition('.')
            if side in SIDES and name.endswith('_size'):
                found.add(name[:-len('_size')])
    known = [size for size in ('tp', 'dp', 'pp', 'pcp') if size in found]
    return tuple(known + sorted(found - set(known)))


# tp, dp and pp today; the plan gives each of them for each side (the engine role writes them, P's pp_size only
# above 1: the connector reads a missing one as 1)
KV_SIZES = _kv_sizes()
KV_DEFAULT = 1
SHOWN = {'block_size': 'block size', 'speculative_config': 'speculative config', 'model': 'model files',
         'tp': 'tp size', 'dp': 'dp size', 'pp': 'pp size', 'pcp': 'pcp size'}
BOTH = 'both sides'


def _same(a, b):
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def shown(name):
    """How a compared attribute is named in the finding."""
    return SHOWN.get(name, name)


def _leaves(tree, prefix=()):
    """{path tuple: value} of the leaves of a nested dict (an empty dict is a leaf)."""
    out = {}
    for key, value in (tree or {}).items():
        if isinstance(value, dict) and value:
            out.update(_leaves(value, prefix + (str(key),)))
        else:
            out[prefix + (str(key),)] = value
    return out


def _side_plans(planned):
    """{side: {size: N}} of the KV_SIZES the plan writes for each side: from its first planned engine that gives
    the size (a host with no instance planned gives none), as the engine role takes them (every engine of a side
    plans the same sizes). A size no planned engine gives is left out, and not compared."""
    out = {}
    for p in planned:
        for size in KV_SIZES:
            if p['kind'] in SIDES and p.get(size) is not None:
                out.setdefault(p['kind'], {}).setdefault(size, int(p[size]))
    return out


def _size(value):
    return int(value) if str(value).isdigit() else value


def _kv_changes(running_extra, user_extra, sides):
    """(attribute, side, was, will) for each kv_connector_extra_config key the running engine launched with or the
    plan writes, when the two differ. SIDES: _side_plans. USER_EXTRA: the host's vllm_pd_kv_connector_extra, None
    when the plan does not say (then only the sizes are compared)."""
    was = _leaves(running_extra)
    will = dict(((side, size + '_size'), value) for side in sides for size, value in sides[side].items())
    out = []
    for side in SIDES:  # the sizes first, in a fixed order; one the plan does not give is not compared
        for size in KV_SIZES:
            path = (side, size + '_size')
            if path in will:
                out.append((size, side, _size(was.get(path, KV_DEFAULT)), will[path]))
    if user_extra is not None:
        sized = set((side, size + '_size') for side in SIDES for size in KV_SIZES)
        mine = dict((path, value) for path, value in _leaves(user_extra).items() if path not in sized)
        for path in sorted((set(was) | set(mine)) - sized):  # the plan's sizes win over the user's (inventory rules)
            side = path[0] if len(path) > 1 and path[0] in SIDES else BOTH
            out.append(('kv_connector_extra_config.' + '.'.join(path), side, was.get(path), mine.get(path)))
    return out


def changed_attributes(running, planned):
    """RUNNING: [{host, kind, unit, model, tp, pp, pcp, settings, kv_extra}] of the engines running now (parse_launch
    plus host, kind, unit); PLANNED: [{host, kind, model_path, tp, dp, pp, pcp, settings, kv_connector_extra}] of this
    run (a size left out is not compared; kv_connector_extra: the host's vllm_pd_kv_connector_extra). -> [(attribute,
    side, was, will)] for each shared attribute a running engine launched with and its host's plan changes. Each
    side's tp, dp and pp sizes are in every engine's kv_connector_extra_config (the connector derives the peer's port
    layout and P's pipeline stages from them), so a change of P's pp, or a new DP rank of an MoE group, changes every
    engine of the cluster; a dense model's ranks run with DP size 1 and add without a change."""
    plan = dict(((p['host'], p['kind']), p) for p in planned)
    sides = _side_plans(planned)
    out = []
    for r in running:
        p = plan.get((r['host'], r['kind']))
        if p is None:
            continue
        kind = r['kind']
        pairs = [(name, kind, r['settings'].get(name), p['settings'].get(name)) for name in SHARED]
        pairs.append(('model', kind, r.get('model'), p.get('model_path')))
        for size in SIZES:
            if p.get(size) is not None:
                pairs.append((size, kind, int(r.get(size) or 1), int(p[size])))
        if r.get('kv_extra') is not None:
            pairs += _kv_changes(r['kv_extra'], p.get('kv_connector_extra'), sides)
        for change in pairs:
            if not _same(change[2], change[3]) and change not in out:
                out.append(change)
    return out


def findings(running, planned, allow_downtime=False):
    """The ChangeNotRollable finding of one cluster, or []."""
    changes = changed_attributes(running, planned)
    if not changes or allow_downtime:
        return []
    names = []
    for name, _kind, _was, _will in changes:
        if shown(name) not in names:
            names.append(shown(name))
    detail = '; '.join('%s on %s: %s -> %s' % (shown(n), k, json.dumps(w, default=str), json.dumps(v, default=str))
                       for n, k, w, v in changes)
    return [{'name': NAME, 'attributes': names,
             'message': '%s: %s change(s) what P and D must share (%s); old and new engines cannot serve together '
                        'while it rolls, so nothing was changed and the cluster keeps serving. Fix: keep the running '
                        'values, or stop the cluster for the change with vllm_pd_allow_downtime: true.'
                        % (NAME, ', '.join(names), detail)}]
