# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A rolling change (vllm_pd_rollout: rolling, issue 21): which hosts change together, and whether a
cluster can roll at all. Pure functions.

Each batch takes hosts out of the proxy, drains, restarts, verifies and puts them back while the other
hosts of their role serve, so a batch never holds every host of a role of a cluster. Per cluster the
prefill hosts go first (P starts before D, and a restarted D proves its pulls from every P), then the
decode hosts; the first batch of each role is one host (the canary). Clusters roll side by side.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.membership import retiring

NAME = 'RollingNotPossible'
ROLES = ('prefill', 'decode')


def _chunks(hosts, size):
    """[canary] then chunks of SIZE, each leaving at least one host of the role serving."""
    if not hosts:
        return []
    out = [hosts[:1]]
    step = max(1, min(size, len(hosts) - 1))
    rest = hosts[1:]
    out.extend(rest[i:i + step] for i in range(0, len(rest), step))
    return out


def engine_hosts(targeted, groups, hostvars):
    """The engine hosts of a rollout: every host of TARGETED (the run's hosts, in their order) in
    groups vllm_pd_prefill, then every one in vllm_pd_decode (a host in both is listed twice), without the
    retiring ones (vllm_pd_state: absent). HOSTVARS maps a host to its variables (vllm_pd_cluster required).
    -> [{host, cluster (a string), role}], the input of batches()."""
    out = []
    for role in ROLES:
        members = groups.get('vllm_pd_' + role) or []
        for host in targeted:
            if host not in members:
                continue
            variables = hostvars[host]
            if not retiring(variables):
                out.append({'host': host, 'cluster': str(variables['vllm_pd_cluster']), 'role': role})
    return out


def batches(hosts, batch_size=1):
    """HOSTS: [{host, cluster, role}] in inventory order (retiring hosts left out). -> [[{host, role}, ...], ...]:
    batch i holds the i-th batch of every cluster (a host in both groups rolls once per role)."""
    per_cluster = {}
    order = []
    for h in hosts:
        cluster = str(h['cluster'])
        if cluster not in per_cluster:
            per_cluster[cluster] = dict((r, []) for r in ROLES)
            order.append(cluster)
        if h['host'] not in per_cluster[cluster][h['role']]:
            per_cluster[cluster][h['role']].append(h['host'])
    plans = [[[{'host': h, 'role': r} for h in chunk] for r in ROLES for chunk in _chunks(per_cluster[c][r], int(batch_size))]
             for c in order]
    depth = max([len(p) for p in plans] or [0])
    return [sum((p[i] for p in plans if i < len(p)), []) for i in range(depth)]


def findings(cluster, hosts, running, admin_api, restarting=None):
    """The RollingNotPossible finding of one running cluster, or []. HOSTS: {role: [host, ...]} that stay;
    RUNNING: the cluster has an engine running now (a first deploy has nothing to roll); ADMIN_API: its
    proxy changes members without a restart; RESTARTING: the roles whose running engines this change
    restarts (None: every role). A role it restarts nothing of keeps serving as it is, so only the roles
    it restarts need a second host, and a change that restarts nothing needs neither host nor admin API."""
    roles = [r for r in ROLES if restarting is None or r in restarting]
    if not running or not roles:
        return []
    causes = []
    if not admin_api:
        causes.append('its proxy has no admin API (the mooncake wheel proxy): taking an instance out needs a '
                      'proxy restart, which cuts every request in flight; use the example proxy (proxy_script: '
                      '.../load_balance_proxy_server_example.py)')
    for role in roles:
        if len(hosts.get(role, [])) < 2:
            causes.append('it has %d %s host(s) (%s) and the change restarts its %s engines: one must serve while '
                          'another restarts; add a %s host first (the default rollout adds it without touching the '
                          'others)' % (len(hosts.get(role, [])), role, ', '.join(hosts.get(role, [])) or 'none', role,
                                       role))
    if not causes:
        return []
    return [{'name': NAME, 'message': '%s: cluster %s cannot roll one host at a time with traffic kept: %s. Nothing '
                                      'was changed. Fix: as said, or deploy without vllm_pd_rollout=rolling (changed '
                                      'engines restart in place; requests in flight on them fail).'
                                      % (NAME, cluster, '; '.join(causes))}]
