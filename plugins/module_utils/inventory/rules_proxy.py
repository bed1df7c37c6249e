# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the proxy: one per cluster unless switched off, and the benchmark settings its host reads.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import bench_settings
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_view import Finding, hfind, show


def rule_proxy(view):
    """Without a vllm_pd_proxy host a cluster gets no proxy and no smoke request: say so, unless
    the operator opted out with vllm_pd_proxy_enabled: false."""
    for name, members in sorted(view.clusters.items()):
        proxies = [h for h in members if h in view.proxy]
        flags = []
        for h in members:
            if view.has(h, "vllm_pd_proxy_enabled"):
                v = view.get(h, "vllm_pd_proxy_enabled")
                if not isinstance(v, bool):
                    yield Finding(name, h, "vllm_pd_proxy_enabled", "vllm_pd_proxy_enabled=%s is not a boolean"
                                  % show(v), "write true or false")
                    continue
                flags.append(v)
        enabled = all(flags)
        if enabled and not proxies:
            yield Finding(name, "", "vllm_pd_proxy", "no host of the cluster is in group vllm_pd_proxy, so no proxy "
                          "would run and no request would prove that KV moves",
                          "add a host of the cluster to vllm_pd_proxy, or set vllm_pd_proxy_enabled: false in the "
                          "cluster group vars to deploy the engines only")
        elif not enabled and proxies:
            yield Finding(name, "", "vllm_pd_proxy_enabled", "vllm_pd_proxy_enabled is false but %s %s in group "
                          "vllm_pd_proxy" % (", ".join(proxies), "is" if len(proxies) == 1 else "are"),
                          "remove the host(s) from vllm_pd_proxy or unset vllm_pd_proxy_enabled")


def rule_benchmark(view):
    """The benchmark's settings (bench_settings.settings_problems), where a proxy host reads them."""
    names = tuple(bench_settings.SETTINGS) + bench_settings.OTHER_SETTINGS
    for h in view.proxy:
        values = dict((n, view.get(h, n)) for n in names if view.has(h, n))
        for var, message, fix in bench_settings.settings_problems(values):
            yield hfind(view, h, var, message, fix)
