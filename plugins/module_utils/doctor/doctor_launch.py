# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each running engine was launched with, and whether P and D fit together (pd_consistency).

The preflight checks the inventory; the doctor checks the processes: an engine started by hand, by
an older deploy or with an edited unit may run other settings than the inventory says. Pure
functions over the argv and environment the doctor read from /proc.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import engine_env, parallel
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import pd_consistency

# Engine variables the fit rules read (the rest of the environment may hold secrets: never kept).
FIT_ENV = pd_consistency.MUST_MATCH_ENV + (engine_env.TRANSFER_TIMEOUT_ENV, engine_env.ABORT_MOONCAKE, engine_env.ABORT_NIXL)
# the spellings of the options it reads back (the release table's serve_flags and serve_aliases: the same in every
# release it knows)
TP_FLAGS = releases.serve_spellings('tensor_parallel_size')
MODEL_FLAGS = releases.serve_spellings('model')
KV_FLAGS = releases.serve_spellings('kv_transfer_config')


def _flag(words, names):
    """Value of the last of NAMES in WORDS ('NAME v' or 'NAME=v'), or None."""
    value = None
    for i, word in enumerate(words):
        for name in names:
            if word == name and i + 1 < len(words):
                value = words[i + 1]
            elif word.startswith(name + '='):
                value = word[len(name) + 1:]
    return value


def parse_launch(argv, environ):
    """ARGV (list of words of the engine process) and ENVIRON ({name: value}) -> the launch settings:
    model (path), tp, pp, pcp (pipeline and prefill context parallel sizes, parallel.args_sizes; 1 when not given),
    settings (pd_consistency.effective_settings), kv_extra (kv_connector_extra_config), kv_role, env (FIT_ENV
    subset), error. None when ARGV is not a 'vllm serve' command line."""
    words = [str(w) for w in argv or []]
    if 'serve' not in words:
        return None
    rest = words[words.index('serve') + 1:]
    out = dict(model=rest[0] if rest and not rest[0].startswith('-') else _flag(rest, MODEL_FLAGS), tp=1, pp=1, pcp=1,
               settings={}, kv_extra=None, kv_role=None, error='',
               env=dict((k, v) for k, v in (environ or {}).items() if k in FIT_ENV))
    try:
        out['tp'] = int(_flag(rest, TP_FLAGS) or 1)
        sizes = parallel.args_sizes(rest, "the running engine's arguments")
        out['pp'], out['pcp'] = sizes['pp'] or 1, sizes['pcp'] or 1
        out['settings'] = pd_consistency.effective_settings({}, rest, 'the running engine')
        kv = _flag(rest, KV_FLAGS)
        if kv:
            kv = json.loads(kv)
            keys = releases.runtime(None)['kv_config_keys']
            out['kv_extra'] = kv.get(keys['extra_config'])
            out['kv_role'] = kv.get(keys['role'])
    except ValueError as exc:
        out['error'] = 'cannot read the launch settings: %s' % exc
    return out


def running_engines(argvs, host):
    """The launch settings (parse_launch, no environment) of each running engine of HOST, from ARGVS ({unit: argv
    words}, what pd_host_read reads), with host, unit and kind (prefill for a vllm-pd-prefill* unit, else
    decode); units whose command line is no 'vllm serve' are left out."""
    out = []
    for unit, argv in argvs.items():
        launch = parse_launch(argv, None)
        if launch:
            out.append(dict(launch, host=host, unit=unit, kind='prefill' if unit.startswith('vllm-pd-prefill') else 'decode'))
    return out


def _label(engine):
    return '%s %s' % (engine['kind'], engine['host'])


def _finding(message, a, b):
    return {'name': 'KvConfigMismatch', 'message': '[KvConfigMismatch] ' + message,
            'hosts': sorted(set([a['host'], b['host']]))}


def _side(extra, kind):
    side = (extra or {}).get(kind) or {}
    return dict((k, side.get(k)) for k in ('tp_size', 'dp_size'))


def kv_extra_findings(engines):
    """kv_connector_extra_config must say the same on P and D, and each side's entry must be what that
    side launches with (tp); otherwise vllm-ascend refuses late ('conflicting data parallel size') or
    maps KV wrongly."""
    out = []
    have = [e for e in engines if e.get('kv_extra') is not None]
    distinct = {}
    for e in have:  # one engine per distinct description, so N hosts with 2 values give one finding
        both = dict(prefill=_side(e['kv_extra'], 'prefill'), decode=_side(e['kv_extra'], 'decode'))
        distinct.setdefault(json.dumps(both, sort_keys=True), e)
    described = list(distinct.items())
    for text, other in described[1:]:
        first_text, a = described[0]
        out.append(_finding('kv_connector_extra_config: %s on %s, %s on %s. P and D must describe both sides the same '
                            'way. Fix: redeploy both from one inventory (playbooks/deploy_pd.yml)' % (
                                first_text, _label(a), text, _label(other)), a, other))
    for e in have:
        said = _side(e['kv_extra'], e['kind']).get('tp_size')
        if said is not None and str(said) != str(e['tp']):
            out.append(_finding('kv_connector_extra_config.%s.tp_size is %s on %s, but it runs with tensor parallel '
                                'size %s. Fix: redeploy it (playbooks/deploy_pd.yml)' % (e['kind'], said, _label(e), e['tp']),
                                e, e))
    return out


def cluster_fit_findings(engines):
    """ENGINES: dicts host, kind, address and launch (parse_launch + model facts). Returns
    pd_consistency findings (name, message, hosts, warning) over the engines whose launch was read."""
    fit = []
    for e in engines:
        launch = e.get('launch')
        if not launch or launch.get('error'):
            continue
        fit.append(dict(host=e['host'], kind=e['kind'], tp=launch['tp'], settings=launch['settings'],
                        model=launch.get('model_facts') or {}, env=launch['env'], address=e.get('address'),
                        kv_extra=launch.get('kv_extra')))
    if not any(e['kind'] == 'prefill' for e in fit) or not any(e['kind'] == 'decode' for e in fit):
        return []
    return pd_consistency.cluster_findings(fit) + kv_extra_findings(fit)
