# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus file_sd target lists of a PD deployment (issue 22), one per job, as the
prometheus.prometheus collection reads them: each is what ``prometheus_targets.<key>`` holds, a list
of ``{targets: [HOST:PORT], labels: {...}}`` (shared/docs/observability-bench.md §B6).

Jobs: vllm_pd_prefill and vllm_pd_decode, every engine instance's API port (vLLM serves /metrics
there, §B4); vllm_pd_proxy, every proxy's port for a blackbox HTTP probe of /healthcheck (neither the
Mooncake nor the vllm-ascend proxy has /metrics, §B4); vllm_pd_front, HAProxy's Prometheus exporter of each proxy
host that runs the proxy tier (/metrics: each process of the proxy up or down, requests in flight, 5xx). Labels:
cluster, role, instance, host.
Pure: the plan in, plain data out.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime

JOBS = ('vllm_pd_prefill', 'vllm_pd_decode', 'vllm_pd_proxy', 'vllm_pd_front')
# the proxy's health route the blackbox probe asks (the release table's, the same in every release it knows)
PROXY_PATH = runtime(None)['proxy_health_route']


def endpoint(address, port):
    """HOST:PORT as Prometheus writes a target (an IPv6 address in brackets)."""
    return '[%s]:%d' % (address, port) if ':' in address else '%s:%d' % (address, port)


def scrape_targets(hosts):
    """{job: [{targets, labels}]} for HOSTS, a list of {host, cluster, address, prefill: [instance],
    decode: [instance], proxy_port: int or None, front_metrics_port: int or None (no exporter)}; an instance is a
    pd_instances entry (name, api_port).
    One entry per endpoint, in inventory order, so each target keeps labels of its own."""
    out = dict((job, []) for job in JOBS)
    for h in hosts:
        for kind in ('prefill', 'decode'):
            for inst in h.get(kind) or []:
                out['vllm_pd_' + kind].append({
                    'targets': [endpoint(h['address'], int(inst['api_port']))],
                    'labels': {'cluster': str(h['cluster']), 'role': kind, 'instance': inst['name'], 'host': h['host']}})
        if h.get('proxy_port'):
            out['vllm_pd_proxy'].append({
                'targets': [endpoint(h['address'], int(h['proxy_port']))],
                'labels': {'cluster': str(h['cluster']), 'role': 'proxy', 'instance': 'proxy', 'host': h['host']}})
        if h.get('front_metrics_port'):
            out['vllm_pd_front'].append({
                'targets': [endpoint(h['address'], int(h['front_metrics_port']))],
                'labels': {'cluster': str(h['cluster']), 'role': 'proxy', 'instance': 'front', 'host': h['host']}})
    return out
