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


def cluster_hosts(groups, hostvars, cluster, kind):
    """The hosts of group vllm_pd_KIND whose vllm_pd_cluster (as text) is CLUSTER (as text), in group order."""
    return [h for h in groups.get('vllm_pd_' + kind) or []
            if str(hostvars[h].get('vllm_pd_cluster', '')) == str(cluster)]
