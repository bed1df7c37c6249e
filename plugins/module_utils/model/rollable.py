# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Can a change of a running cluster roll, one instance at a time, with traffic kept (issue 21)?

Not when it changes what P and D must share: while it rolls, old P would send KV to new D (or the
reverse), and the VA MooncakeConnector checks no compatibility hash, so a mismatched pair is not
refused, it garbles output (shared docs day2-ops.md §3: block size on one side, vllm-ascend#14545;
speculative config changes P's layer range, #15467). The running engines' launch settings
(doctor_launch.parse_launch over /proc/PID/cmdline) are compared with the planned ones (the
preflight's engines list, pd_consistency.effective_settings); pure functions.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

NAME = 'ChangeNotRollable'
# settings both sides must share (the KV layout and what decides it); max_model_len and the served name are not
SHARED = ('block_size', 'kv_cache_dtype', 'dtype', 'quantization', 'speculative_config')
SHOWN = {'block_size': 'block size', 'kv_cache_dtype': 'kv_cache_dtype', 'dtype': 'dtype',
         'quantization': 'quantization', 'speculative_config': 'speculative config', 'model': 'model files',
         'tp': 'tp relation', 'dp': 'dp size'}
SIDES = ('prefill', 'decode')


def _same(a, b):
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def changed_attributes(running, planned):
    """RUNNING: [{host, kind, unit, model, tp, settings, kv_extra}] of the engines running now (parse_launch plus
    host, kind, unit); PLANNED: [{host, kind, model_path, tp, dp, settings}] of this run. -> [(attribute, side, was,
    will)] for each shared attribute a running engine launched with and its host's plan changes. The DP size of
    each side is in every engine's kv_connector_extra_config (the connector derives the peer's port layout from
    it), so a new DP rank of an MoE group changes every engine of the cluster; a dense model's ranks run with
    DP size 1 and add without a change."""
    plan = dict(((p['host'], p['kind']), p) for p in planned)
    dp_plan = dict((p['kind'], p.get('dp')) for p in planned)
    out = []
    for r in running:
        p = plan.get((r['host'], r['kind']))
        if p is None:
            continue
        kind = r['kind']
        pairs = [(name, kind, r['settings'].get(name), p['settings'].get(name)) for name in SHARED]
        pairs.append(('model', kind, r.get('model'), p.get('model_path')))
        pairs.append(('tp', kind, r.get('tp'), p.get('tp')))
        for side in SIDES:
            was = ((r.get('kv_extra') or {}).get(side) or {}).get('dp_size')
            if was is not None and dp_plan.get(side) is not None:
                pairs.append(('dp', side, int(was), int(dp_plan[side])))
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
        if SHOWN[name] not in names:
            names.append(SHOWN[name])
    detail = '; '.join('%s on %s: %s -> %s' % (SHOWN[n], k, json.dumps(w, default=str), json.dumps(v, default=str))
                       for n, k, w, v in changes)
    return [{'name': NAME, 'attributes': names,
             'message': '%s: %s change(s) what P and D must share (%s); old and new engines cannot serve together '
                        'while it rolls, so nothing was changed and the cluster keeps serving. Fix: keep the running '
                        'values, or stop the cluster for the change with vllm_pd_allow_downtime: true.'
                        % (NAME, ', '.join(names), detail)}]
