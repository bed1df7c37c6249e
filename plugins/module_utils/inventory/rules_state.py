# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of day-2 state: vllm_pd_state absent retires a host; the cluster keeps a serving side of each kind
and its proxy.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_view import Finding, show


def rule_state(view):
    """vllm_pd_state: absent retires a host (drained out of the proxy, then stopped, its files removed);
    the cluster must keep a serving side of each kind and its proxy."""
    for name, members in sorted(view.clusters.items()):
        present = []
        for h in members:
            v = view.get(h, "vllm_pd_state", "present")
            if v not in ("present", "absent"):
                yield Finding(name, h, "vllm_pd_state", "vllm_pd_state=%s is not present or absent" % show(v),
                              "write present (the default) or absent (drain, stop and remove this host's instances)")
            elif v == "absent" and h in view.proxy:
                yield Finding(name, h, "vllm_pd_state", "vllm_pd_state is absent on the cluster's proxy host, so the "
                              "proxy would go away with it", "move the proxy to a host that stays (group vllm_pd_proxy) "
                              "in one run, then retire this host in the next")
            elif v != "absent":
                present.append(h)
        for kind, group in (("prefill", view.prefill), ("decode", view.decode)):
            if any(h in group for h in members) and not any(h in group for h in present):
                yield Finding(name, "", "vllm_pd_state", "every %s host of the cluster has vllm_pd_state: absent, so "
                              "nothing would serve that side" % kind,
                              "keep one %s host present, or stop the cluster with stop_pd.yml" % kind)


def rule_limit(view):
    """Only a host this run targets is read and planned, and two roles need the plan of other hosts of their
    cluster: a decode host proves it reaches every prefill port group before it starts, and the proxy lists every
    engine of the cluster. --limit without those hosts would fail there, after the preflight's changes (and P's
    restart); named here instead, before any host is contacted."""
    if view.targeted is None:
        return
    targeted = set(view.targeted)
    for name, members in sorted(view.clusters.items()):
        present = [h for h in members if view.get(h, "vllm_pd_state", "present") != "absent"]
        for h in [h for h in present if h in targeted]:
            if h in view.proxy:
                needs, why = view.prefill + view.decode, "the proxy lists every engine of the cluster"
            elif h in view.decode:
                needs, why = view.prefill, "the decode side proves it reaches every prefill port group"
            else:
                continue
            missing = [m for m in present if m in needs and m not in targeted]
            if missing:
                verb = "is" if len(missing) == 1 else "are"
                yield Finding(name, h, "--limit", "%s is in this run (--limit) but %s of its cluster %s not; %s, which "
                              "needs their plan from the same run" % (h, ", ".join(missing), verb, why),
                              "run on the whole cluster (--limit cluster_%s), or add %s to --limit" % (name, ",".join(missing)))
