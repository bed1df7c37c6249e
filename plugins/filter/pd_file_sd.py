# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_file_sd
short_description: Prometheus file_sd target lists of every P, D and proxy endpoint of a PD deployment
version_added: "1.1.0"
description:
  - One list per job, each exactly what the C(prometheus.prometheus) collection's C(prometheus_targets.<key>)
    would hold (a list of C(targets) and C(labels)), so it can be written as C(file_sd/<key>.yml).
  - Jobs V(vllm_pd_prefill) and V(vllm_pd_decode) list every engine instance's API port (vLLM serves C(/metrics)
    there); V(vllm_pd_proxy) lists every proxy port for a blackbox probe of C(/healthcheck) (the proxies have
    no C(/metrics)); V(vllm_pd_front) lists HAProxy's Prometheus exporter (C(/metrics)) of each proxy host that
    runs the proxy tier (C(vllm_pd_proxy_front=haproxy), port C(vllm_pd_proxy_front_metrics_port), instance V(front)).
  - Labels C(cluster), C(role) (V(prefill), V(decode), V(proxy)), C(instance) (the instance name, e.g. V(prefill-dp1))
    and C(host) (the inventory name).
  - Reads the facts the preflight sets on each PD host (C(vllm_pd_address), C(vllm_pd_instances)); a host without
    them (not in this run) is left out.
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  hosts:
    description: The PD hosts to list, e.g. C(ansible_play_hosts_all).
    type: list
    elements: str
    required: true
  proxies:
    description: The hosts that run a proxy (C(groups['vllm_pd_proxy'])).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: The scrape targets of this run
  ansible.builtin.set_fact:
    targets: "{{ hostvars | vllm_pd.ascend.pd_file_sd(ansible_play_hosts_all, groups['vllm_pd_proxy'] | default([])) }}"
  run_once: true
# -> {vllm_pd_prefill: [{targets: ['10.0.30.10:8100'], labels: {cluster: a, role: prefill, instance: prefill, host: p1}}],
#     vllm_pd_decode: [...], vllm_pd_proxy: [{targets: ['10.0.30.10:8000'], labels: {..., role: proxy}}]}
"""

RETURN = r"""
_value:
  description:
    - One key per job (V(vllm_pd_prefill), V(vllm_pd_decode), V(vllm_pd_proxy)), each a list of
      C(targets) (one C(HOST:PORT)) and C(labels) (C(cluster), C(role), C(instance), C(host)).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.proxy_front import metrics_port
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.file_sd import scrape_targets


def pd_file_sd(hostvars, hosts, proxies=None):
    records = []
    for h in hosts or []:
        hv = hostvars[h]
        if 'vllm_pd_address' not in hv or 'vllm_pd_instances' not in hv:
            continue
        try:
            records.append({
                'host': str(h), 'cluster': str(hv['vllm_pd_cluster']), 'address': str(hv['vllm_pd_address']['address']),
                'prefill': hv['vllm_pd_instances'].get('prefill') or [],
                'decode': hv['vllm_pd_instances'].get('decode') or [],
                'proxy_port': int(hv.get('vllm_pd_proxy_port', 8000)) if h in (proxies or []) else None,
                'front_metrics_port': (metrics_port(hv)[2] or None) if h in (proxies or []) else None})
        except (KeyError, TypeError, ValueError) as exc:
            raise AnsibleFilterError('pd_file_sd: host %s: %s' % (h, exc))
    return scrape_targets(records)


class FilterModule(object):
    def filters(self):
        return {'pd_file_sd': pd_file_sd}
