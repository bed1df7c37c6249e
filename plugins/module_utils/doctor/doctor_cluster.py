# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the doctor reads of the inventory before it inspects a host: the engines of the host, the hosts of
its cluster it checks MTU and ping towards, and the prefill addresses a decode host probes.

Pure functions: ``hosts`` is hostvars (or plain dicts in its shape: host name -> its variables, of which
only vllm_pd_cluster, vllm_pd_state, vllm_pd_address and, after the inspect step, __doctor_inspect are
read, with .get), ``play_hosts`` ansible_play_hosts_all. Cross-host checks only ever join hosts of the same vllm_pd_cluster
(docs/design.md); a host being retired (vllm_pd_state: absent) serves nothing and is no peer.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.membership import as_int, cluster_hosts, retiring

_MISSING = object()


def doctor_engines(instances):
    """One entry per vLLM instance of the host (prefill first, then decode), with what pd_doctor inspects;
    a prefill entry also carries its KV port group layout."""
    out = []
    for kind in ('prefill', 'decode'):
        for i in instances[kind]:
            engine = {'kind': kind, 'unit': i['unit'], 'env_file': i['env_file'], 'api_port': i['api_port'],
                      'container': i['container'], 'container_engine': i['container_engine']}
            if kind == 'prefill':
                engine.update({'kv_port': as_int(i['kv_port']), 'tp_size': as_int(i['tp']),
                               'pp_size': as_int(i.get('pp', 1)), 'pcp_size': as_int(i.get('pcp', 1)),
                               'dp_rank_start': i['port_rank_start'], 'dp_size': i['dp_size_local']})
            out.append(engine)
    return out


def cluster_members(hosts, groups, host, play_hosts):
    """The hosts of the play in host's cluster that are not being retired, in play order, and of them
    the prefill and the decode hosts: (members, prefill, decode)."""
    members = cluster_hosts(groups, hosts, hosts[host].get('vllm_pd_cluster', ''), hosts=play_hosts, present=True)
    prefill = [h for h in members if h in (groups.get('vllm_pd_prefill') or [])]
    decode = [h for h in members if h in (groups.get('vllm_pd_decode') or [])]
    return members, prefill, decode


def doctor_peers(hosts, groups, host, play_hosts):
    """The hosts of the other side of host's cluster (decode hosts for a prefill host, prefill hosts for a
    decode host, both for a host in both groups; never host itself) that have an inventory address,
    with it: what MTU and ping go towards."""
    _members, prefill, decode = cluster_members(hosts, groups, host, play_hosts)
    names = []
    if host in (groups.get('vllm_pd_prefill') or []):
        names += decode
    if host in (groups.get('vllm_pd_decode') or []):
        names += prefill
    out = []
    for h in names:
        address = hosts[h].get('vllm_pd_address', _MISSING)
        if h != host and address is not _MISSING and h not in [p['host'] for p in out]:
            out.append({'host': h, 'address': address['address']})
    return out


def doctor_targets(hosts, groups, host, play_hosts):
    """What a decode host probes: for each prefill host of its cluster, each prefill engine the inspect
    step found with a KV port group, the address it advertises and every port of the group."""
    _members, prefill, _decode = cluster_members(hosts, groups, host, play_hosts)
    out = []
    for h in prefill:
        inspect = hosts[h].get('__doctor_inspect') or {}
        for e in inspect.get('engines') or []:
            if e.get('kind') == 'prefill' and 'group' in e:
                out.append({'host': h, 'address': e['advertised']['address'], 'ports': e['group']['ports'],
                            'what': 'advertised'})
    return out


UNINSPECTED = 'the host was unreachable or a task failed before the doctor could inspect it'


def diagnose_hosts(hosts, play_hosts):
    """The diagnose input: every host of the play but those being retired (they are expected to run nothing),
    also those that failed or were unreachable, in play order: its __doctor_entry (else its cluster, groups and
    why it has none), with the proxy's members as the proxy served them (__proxy_inspect_members, else None)."""
    out = {}
    for h in play_hosts:
        v = hosts[h]
        if retiring(v):
            continue
        names = [g[len('vllm_pd_'):] if g.startswith('vllm_pd_') else g for g in v['group_names']]
        entry = v.get('__doctor_entry', _MISSING)
        if entry is _MISSING:
            entry = {'cluster': v.get('vllm_pd_cluster', ''), 'groups': [r for r in ('prefill', 'decode', 'proxy') if r in names],
                     'unreachable': UNINSPECTED}
        out[h] = dict(entry, proxy_members=v.get('__proxy_inspect_members'))
    return out
