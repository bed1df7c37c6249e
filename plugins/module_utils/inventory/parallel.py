# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pipeline (pp) and prefill context (pcp) parallel sizes of one side of a cluster, as part of the plan.

vllm-ascend's Mooncake connector puts both in the side channel port formula: the DP stride is
tp * pp * pcp and each P worker binds kv_port + dp_rank*tp*pp*pcp + (pp_rank*pcp + pcp_rank)*tp + tp_rank
(0.23 mooncake_connector.py 1650-1657, 2029-2038); D reads P's pipeline size from
kv_connector_extra_config.prefill.pp_size and asserts its own is 1 (2068-2086). The sizes come from the
inventory variables vllm_pd_<kind>_pp_size / vllm_pd_<kind>_pcp_size and from the engine's extra args
(vLLM 0.23 engine/arg_utils.py: --pipeline-parallel-size/-pp, --prefill-context-parallel-size/-pcp).

Pure functions; errors are ValueError with the variable, what is wrong and the fix.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases

# the option, then its short spelling, of each size (the release table's serve_flags and serve_aliases: the same in
# every release, but 0.11.0 has no pcp option, and release_problem refuses pcp > 1 there)
FLAGS = {
    'pp': releases.serve_spellings('pipeline_parallel_size'),
    'pcp': releases.serve_spellings('prefill_context_parallel_size'),
}
VARIABLE = 'vllm_pd_%s_%s_size'  # % (kind, 'pp' or 'pcp')
NAMES = {'pp': 'pipeline parallel', 'pcp': 'prefill context parallel'}


def args_sizes(args, where='extra args'):
    """{'pp': N or None, 'pcp': N or None} as vLLM's argparse reads ARGS (the last occurrence wins).

    Spellings: ``--pipeline-parallel-size N``, ``--pipeline-parallel-size=N``, ``-pp N``, ``-pp=N`` (and the
    same for --prefill-context-parallel-size / -pcp). ValueError when a value is missing or not a whole number >= 1.
    """
    out = {'pp': None, 'pcp': None}
    words = [str(w) for w in (args or [])]
    i = 0
    while i < len(words):
        word = words[i]
        for key, flags in FLAGS.items():
            flag, value = None, None
            for f in flags:
                if word == f:
                    flag = f
                    if i + 1 >= len(words):
                        raise ValueError('%s end with %s but give no size after it' % (where, f))
                    value = words[i + 1]
                    i += 1
                elif word.startswith(f + '='):
                    flag, value = f, word[len(f) + 1:]
            if flag is None:
                continue
            if not value.isdigit() or int(value) < 1:
                raise ValueError('%s pass %s %s, which is not a whole number >= 1' % (where, flag, value))
            out[key] = int(value)
        i += 1
    return out


def _size(value, variable):
    if value is None or value == '':
        return None
    if isinstance(value, bool) or not str(value).isdigit() or int(value) < 1:
        raise ValueError('%s=%r is not a whole number >= 1' % (variable, value))
    return int(value)


def side_sizes(kind, args=None, pp_size=None, pcp_size=None, args_variable=None):
    """The pp and pcp of KIND's engines and the vllm serve options the collection adds for them.

    ARGS are the engine's extra args (ARGS_VARIABLE names them, default <kind>_extra_args); PP_SIZE and
    PCP_SIZE the inventory variables (None when unset). A size given in both places must agree. Returns
    {'pp', 'pcp', 'args'}: args are the options for sizes > 1 given only by a variable (the extra args already
    carry the others). ValueError names the variable and the fix.
    """
    args_variable = args_variable or '%s_extra_args' % kind
    given = args_sizes(args, args_variable)
    out = {'args': []}
    for key, value in (('pp', pp_size), ('pcp', pcp_size)):
        var = VARIABLE % (kind, key)
        size = _size(value, var)
        if size is not None and given[key] is not None and size != given[key]:
            raise ValueError('%s=%s but %s pass %s %s. Fix: give the %s size in one place (or the same in both)'
                             % (var, size, args_variable, FLAGS[key][0], given[key], NAMES[key]))
        if size is not None and given[key] is None and size > 1:
            out['args'] += [FLAGS[key][0], str(size)]
        out[key] = size if size is not None else (given[key] or 1)
    return out


def release_problem(kind, pp, pcp, version=None):
    """None when the connector of vllm-ascend VERSION (None or unknown: the newest table entry's rule) can
    serve KIND with these sizes, else the reason and the fix in one sentence (release table: port_terms, pp_pcp)."""
    entry = None
    if version:
        try:
            entry = releases.find(version)
        except ValueError:
            entry = None
    if entry is None:
        entry = releases.RELEASES[releases.supported_versions()[0]]
        label = 'the connector'
    else:
        label = "vllm-ascend %s's Mooncake connector" % releases.normalize(version)
    pv, cv = VARIABLE % (kind, 'pp'), VARIABLE % (kind, 'pcp')
    if kind == 'decode' and pp > 1:
        return ('the decode side runs with pipeline parallel size %d, but %s asserts "decode pp size must be 1". '
                'Fix: set %s to 1 (pipeline parallelism is for the prefill side)' % (pp, label, pv))
    mode = entry.get('pp_pcp', 'both')
    if mode == 'none' and (pp > 1 or pcp > 1):
        return ('%s has no pipeline or context parallel terms in its port formula (only tp), so pp %d / pcp %d '
                'would make its workers bind the wrong ports. Fix: set %s and %s to 1, or install one of %s'
                % (label, pp, pcp, pv, cv, ', '.join(releases.supported_versions())))
    if mode == 'exclusive' and pp > 1 and pcp > 1:
        return ('%s serves pipeline or prefill context parallelism, not both (pp %d with pcp %d). Fix: set %s or %s '
                'to 1' % (label, pp, pcp, pv, cv))
    return None


def extra_config_problem(user, prefill, decode):
    """None when the user's kv_connector_extra_config (vllm_pd_kv_connector_extra) agrees with the plan,
    else why. PREFILL/DECODE: {'tp_size', 'dp_size', 'pp_size'} of the plan. The plan's sizes win in the
    rendered config, so a different value the user wrote would be silently replaced: refuse it instead."""
    if not isinstance(user, dict):
        return None
    for side, plan in (('prefill', prefill), ('decode', decode)):
        mine = user.get(side)
        if mine is None:
            continue
        if not isinstance(mine, dict):
            return ('vllm_pd_kv_connector_extra.%s must be a mapping, not %r. Fix: write it as a mapping, or leave '
                    'it out (the collection writes tp_size, dp_size and pp_size itself)' % (side, mine))
        for key in ('tp_size', 'dp_size', 'pp_size'):
            if key in mine and key in plan and str(mine[key]) != str(plan[key]):
                return ('vllm_pd_kv_connector_extra.%s.%s=%s disagrees with the plan (%s %s launches with %s). Fix: '
                        'remove it (the collection writes it from the plan) or change the %s size of the plan'
                        % (side, key, mine[key], side, key[:-len('_size')], plan[key], side))
    partition = (user.get('prefill') or {}).get('pp_layer_partition') if isinstance(user.get('prefill'), dict) else None
    if partition is not None:
        parts = [p.strip() for p in str(partition).split(',')]
        pp = int(prefill.get('pp_size', 1))
        if len(parts) != pp or not all(p.isdigit() for p in parts):
            return ('vllm_pd_kv_connector_extra.prefill.pp_layer_partition=%s does not give a layer count for each of '
                    'the %d pipeline stage(s) of the prefill side. Fix: write %d comma-separated numbers, or leave it '
                    'out' % (partition, pp, pp))
    return None
