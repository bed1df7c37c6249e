# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The peers a host dials to prove its routes (tcp_reach.py probes them; issue 36: logic in Python, not Jinja).
A pure function of the inventory groups and the host variables (plain dicts or Ansible's hostvars)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.membership import as_int, cluster_hosts
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import instance_ports


def reach_targets(groups, hostvars, host):
    """What HOST dials to prove the route to the other side of its cluster (a pure function of the inventory groups
    and host variables; the preflight's tcp_reach targets). A decode host dials the first port of the Mooncake group
    of each prefill host's first instance (the KV side channel); a prefill host dials each decode host's first API
    port (the transfer path back); a host with both does both, each peer once. Hosts without a resolved address or
    a plan in this run (--limit) are left out. One {host, role, address, interface, port, var} per peer."""
    own = hostvars[host]
    out = []
    for kind, other in (('decode', 'prefill'), ('prefill', 'decode')):
        if not own['vllm_pd_instances'][kind]:
            continue
        for peer in cluster_hosts(groups, hostvars, own.get('vllm_pd_cluster', ''), other):
            hv = hostvars[peer]
            if (peer == host or 'vllm_pd_address' not in hv
                    or 'vllm_pd_instances' not in hv or not hv['vllm_pd_instances'][other]):
                continue
            first = hv['vllm_pd_instances'][other][0]
            port = instance_ports(first)[0] if other == 'prefill' else first['api_port']
            if peer not in [t['host'] for t in out]:
                address = hv['vllm_pd_address']
                out.append({'host': peer, 'role': other, 'address': address['address'],
                            'interface': address.get('interface', ''), 'port': as_int(port),
                            'var': 'vllm_pd_%s' % (address.get('source', 'host_ip'),)})
    return out
