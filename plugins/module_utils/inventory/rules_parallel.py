# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the parallel sizes: pipeline and prefill context parallel per side, external DP ranks, the
prefill/decode tp ratio (parallel.py decides the sizes).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import parallel
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_view import Finding, _ranks, as_int, hfind, is_list


def _message_fix(text, default_fix=""):
    """'WHAT. Fix: HOW' (parallel.py's sentences) -> (WHAT, HOW)."""
    what, _sep, fix = text.partition(". Fix: ")
    return what, fix or default_fix


def rule_parallel_sizes(view):
    """Pipeline and prefill context parallel sizes: one value per side (variable or extra args, equal if both),
    what the release's connector can serve, the same on every host of a side, and a user
    kv_connector_extra_config that agrees with them (parallel.py)."""
    for name, members in sorted(view.clusters.items()) + [("", [h for h in view.hosts if not view.cluster_of(h)])]:
        plan = {}
        for kind, group in (("prefill", view.prefill), ("decode", view.decode)):
            seen = {}
            for h in [x for x in members if x in group]:
                args_var, args = view.first(h, kind + "_extra_args", "vllm_pd_extra_args", default=[])
                if not is_list(args):
                    continue  # rule_argv_words
                pp_var, pcp_var = parallel.VARIABLE % (kind, "pp"), parallel.VARIABLE % (kind, "pcp")
                if as_int(view.get(h, pp_var, 1)) is None or as_int(view.get(h, pcp_var, 1)) is None:
                    continue  # rule_numbers
                try:
                    sizes = parallel.side_sizes(kind, args, view.get(h, pp_var), view.get(h, pcp_var), args_var)
                except ValueError as exc:
                    what, fix = _message_fix(str(exc), "write the size as a whole number after the option")
                    yield hfind(view, h, pp_var if pp_var in what or "pipeline" in what else pcp_var, what, fix)
                    continue
                why = parallel.release_problem(kind, sizes["pp"], sizes["pcp"], view.get(h, "vllm_pd_vllm_ascend_version"))
                if why:
                    yield hfind(view, h, pp_var if sizes["pp"] > 1 else pcp_var, *_message_fix(why))
                seen.setdefault((sizes["pp"], sizes["pcp"]), []).append(h)
            if len(seen) > 1:
                yield Finding(name, "", parallel.VARIABLE % (kind, "pp"), "the %s hosts launch with different pipeline/"
                              "context parallel sizes (%s); D reads one prefill.pp_size for all of them" % (kind, "; ".join(
                                  "pp %d pcp %d on %s" % (k[0], k[1], ", ".join(v)) for k, v in sorted(seen.items()))),
                              "set vllm_pd_%s_pp_size / vllm_pd_%s_pcp_size (or the extra args) once in the cluster "
                              "group vars" % (kind, kind))
            elif seen:
                plan[kind] = list(seen)[0]
        if "prefill" not in plan:
            continue
        for h in members:
            user = view.get(h, "vllm_pd_kv_connector_extra")
            tp = view.int_of(h, "vllm_pd_prefill_tp_size")
            prefill = {"pp_size": plan["prefill"][0]}
            if tp:
                prefill["tp_size"] = tp
            decode = {"pp_size": 1}
            if view.int_of(h, "vllm_pd_decode_tp_size"):
                decode["tp_size"] = view.int_of(h, "vllm_pd_decode_tp_size")
            why = parallel.extra_config_problem(user, prefill, decode)
            if why:
                yield hfind(view, h, "vllm_pd_kv_connector_extra", *_message_fix(why))


def _pp_pcp(view, h, kind):
    """(pp, pcp) of KIND's engines on H; (1, 1) when they cannot be read (rule_parallel_sizes names why)."""
    _var, args = view.first(h, kind + "_extra_args", "vllm_pd_extra_args", default=[])
    try:
        sizes = parallel.side_sizes(kind, args if is_list(args) else [], view.get(h, "vllm_pd_%s_pp_size" % kind),
                                    view.get(h, "vllm_pd_%s_pcp_size" % kind))
    except ValueError:
        return 1, 1
    return sizes["pp"], sizes["pcp"]


def rule_external_dp(view):
    """External DP: the ranks listed on a side's hosts cover 0 .. dp_size-1, each on one host."""
    for name, members in sorted(view.clusters.items()):
        for kind, group in (("prefill", view.prefill), ("decode", view.decode)):
            hosts = [h for h in members if h in group]
            if not hosts:
                continue
            var = "vllm_pd_%s_dp_ranks" % kind
            dp = view.int_of(hosts[0], "vllm_pd_%s_dp_size" % kind, 1)
            owner, without = {}, []
            for x in hosts:
                rs = _ranks(view.get(x, var, [])) or []
                if not rs:
                    without.append(x)
                for r in sorted(set(rs), key=rs.index):
                    if r in owner:
                        yield Finding(name, "", var, "%s DP rank %d is listed on %s and %s (%s)"
                                      % (kind, r, owner[r], x, var), "give each rank to one host")
                    owner[r] = x
            if owner and without:
                yield Finding(name, "", var, "%s set %s (external DP) but %s do(es) not"
                              % (", ".join(sorted(set(owner.values()), key=hosts.index)), var, ", ".join(without)),
                              "list the DP ranks of every %s host of the cluster" % kind)
            missing = [str(r) for r in range(dp or 0) if r not in owner]
            if owner and dp and missing:
                yield Finding(name, "", var, "%s DP rank(s) %s of vllm_pd_%s_dp_size=%d are served by no host"
                              % (kind, ", ".join(missing), kind, dp),
                              "add them to %s of a %s host of the cluster" % (var, kind))


def rule_tp_ratio(view):
    for name, members in sorted(view.clusters.items()):
        h = members[0]
        p, d = view.int_of(h, "vllm_pd_prefill_tp_size"), view.int_of(h, "vllm_pd_decode_tp_size")
        if not p or not d:
            continue
        if p < d:
            yield Finding(name, "", "vllm_pd_prefill_tp_size", "vllm_pd_prefill_tp_size=%d is smaller than "
                          "vllm_pd_decode_tp_size=%d; vLLM-Ascend refuses prefill tp < decode tp at startup" % (p, d),
                          "raise the prefill tp or lower the decode tp")
        elif p % d:
            yield Finding(name, "", "vllm_pd_prefill_tp_size", "vllm_pd_prefill_tp_size=%d is not a multiple of "
                          "vllm_pd_decode_tp_size=%d (required for non-MLA models)" % (p, d),
                          "choose tp sizes where prefill is a multiple of decode")
