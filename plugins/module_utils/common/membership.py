# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who belongs to a cluster, read from the inventory (groups and host variables), and Jinja's int: what the
filters that replaced the roles' Jinja programs share. In common because every stage's filters need it (the
preflight's reach targets, the decode's prefill groups, the NPU peers, the doctor). Pure functions, no imports of
the collection.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type


def as_int(value):
    """Jinja's int filter: the integer of VALUE (a number or its text), 0 when it has none."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def retiring(variables):
    """Whether a host with VARIABLES is being retired (vllm_pd_state: absent): it serves nothing any more."""
    return variables.get('vllm_pd_state', 'present') == 'absent'


def cluster_hosts(groups, hostvars, cluster, kind=None, hosts=None, present=False):
    """The one rule of cluster membership (issue 36): the names of the hosts whose vllm_pd_cluster, as text, is
    CLUSTER, as text; a host without vllm_pd_cluster belongs to none. Taken from HOSTS (names in the caller's order:
    the play's hosts, the run's targets) or else from group vllm_pd_KIND, or else from every inventory host; KIND (a
    role or a list of roles: prefill, decode, proxy) keeps only the hosts of those role groups; PRESENT leaves out the
    hosts being retired. Each host once, in the order taken; hosts HOSTVARS does not know are left out."""
    kinds = [kind] if isinstance(kind, str) else list(kind or [])
    in_roles = set(h for k in kinds for h in groups.get('vllm_pd_' + k) or [])
    if hosts is None:
        hosts = (groups.get('vllm_pd_' + kinds[0]) or []) if len(kinds) == 1 else (groups.get('all') or list(hostvars))
    out = []
    for h in hosts:
        if h in out or h not in hostvars or (kinds and h not in in_roles):
            continue
        variables = hostvars[h]
        if 'vllm_pd_cluster' in variables and str(variables['vllm_pd_cluster']) == str(cluster) \
                and not (present and retiring(variables)):
            out.append(h)
    return out
