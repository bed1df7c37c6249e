# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the proxy: one per cluster unless switched off, its front (the proxy tier), and the benchmark settings its
host reads.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import bench_settings
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_view import Finding, as_int, hfind, show

# what the proxy tier reads on a proxy host (the role variable before the vllm_pd_ one)
FRONT_VARS = (proxy_front.FRONT_CHOICE_VARS + ("proxy_front_processes", "vllm_pd_proxy_front_processes",
              "proxy_front_base_port", "vllm_pd_proxy_front_base_port", "proxy_port", "vllm_pd_proxy_port")
              + proxy_front.METRICS_PORT_VARS)


def front_metrics_port(view, h):
    """(variable, raw value, port) of HAProxy's Prometheus exporter on host H (proxy_front.metrics_port): port is the
    TCP port (0: no exporter), or None when H is no proxy host, runs no proxy tier or the value is no port 0-65535
    (rule_proxy_front names that)."""
    var, raw, port = proxy_front.metrics_port(view.hostvars.get(h, {}))
    return var, raw, port if h in view.proxy else None


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


def rule_proxy_front(view):
    """vllm_pd_proxy_front is none or haproxy; with haproxy, the processes (1..MAX_PROCESSES) and their loopback ports
    (within 1-65535, not the proxy port itself); a rolling change does not drive the tier yet."""
    for h in view.proxy:
        var, front = view.first(h, *proxy_front.FRONT_CHOICE_VARS, default=proxy_front.DEFAULT_FRONT)
        if front not in proxy_front.FRONTS:
            yield hfind(view, h, var, "%s=%s is not a proxy front (%s)" % (var, show(front), ", ".join(proxy_front.FRONTS)),
                        "write %s: haproxy for the proxy tier (HAProxy in front of the proxy's processes) or "
                        "%s: none for one proxy process on the proxy port" % (var, var))
            continue
        if front != "haproxy":
            continue
        nvar, raw = view.first(h, "proxy_front_processes", "vllm_pd_proxy_front_processes",
                               default=proxy_front.DEFAULT_PROCESSES)
        n = as_int(raw)
        if n is None or not 1 <= n <= proxy_front.MAX_PROCESSES:
            yield hfind(view, h, nvar, "%s=%s must be a whole number of proxy processes from 1 to %d"
                        % (nvar, show(raw), proxy_front.MAX_PROCESSES), "write e.g. %s: %d"
                        % (nvar, proxy_front.DEFAULT_PROCESSES))
            n = None
        bvar, raw_base = view.first(h, "proxy_front_base_port", "vllm_pd_proxy_front_base_port",
                                    default=proxy_front.DEFAULT_BASE_PORT)
        base = as_int(raw_base)
        if base is None or base < 1:
            yield hfind(view, h, bvar, "%s=%s must be a TCP port (the loopback port of proxy process 1)"
                        % (bvar, show(raw_base)), "write e.g. %s: %d" % (bvar, proxy_front.DEFAULT_BASE_PORT))
        elif n is not None:
            ports = proxy_front.process_ports(base, n)
            pvar, raw_port = view.first(h, "proxy_port", "vllm_pd_proxy_port", default=8000)
            if ports[-1] > 65535:
                yield hfind(view, h, bvar, "%s=%d with %d proxy processes needs ports up to %d, beyond 65535"
                            % (bvar, base, n, ports[-1]), "choose a lower %s" % bvar)
            elif as_int(raw_port) in ports:
                yield hfind(view, h, bvar, "the proxy processes' loopback ports %d-%d (%s=%d) include the proxy port "
                            "%s=%s that HAProxy binds" % (ports[0], ports[-1], bvar, base, pvar, show(raw_port)),
                            "move %s away from the proxy port, e.g. %s: %d" % (bvar, bvar, proxy_front.DEFAULT_BASE_PORT))
        # (the proxy port, the group and the other ports of the host: rule_ports; the monitoring ports: rule_monitoring)
        mvar, raw_metrics, metrics = front_metrics_port(view, h)
        if metrics is None:
            yield hfind(view, h, mvar, "%s=%s must be a TCP port (HAProxy's Prometheus exporter) or 0 for none"
                        % (mvar, show(raw_metrics)), "write e.g. %s: %d" % (mvar, proxy_front.DEFAULT_METRICS_PORT))
        elif metrics and n is not None and base is not None and metrics in proxy_front.process_ports(base, n):
            yield hfind(view, h, mvar, "%s=%d is the loopback port of a proxy process" % (mvar, metrics),
                        "give HAProxy's exporter a port of its own, e.g. %s: %d" % (mvar, proxy_front.DEFAULT_METRICS_PORT))
        if view.rollout == "rolling":
            yield hfind(view, h, var, "vllm_pd_rollout=rolling does not drive the proxy tier (%s=haproxy) yet: its "
                        "member changes go through one proxy's admin API" % var,
                        "run the rolling change with %s: none, or deploy without vllm_pd_rollout=rolling" % var)


def rule_benchmark(view):
    """The benchmark's settings (bench_settings.settings_problems), where a proxy host reads them."""
    names = tuple(bench_settings.SETTINGS) + bench_settings.OTHER_SETTINGS
    for h in view.proxy:
        values = dict((n, view.get(h, n)) for n in names if view.has(h, n))
        for var, message, fix in bench_settings.settings_problems(values):
            yield hfind(view, h, var, message, fix)
