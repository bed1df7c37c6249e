# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engines of one cluster as the preflight compares them (issue 36: logic in Python, not Jinja). Pure functions
of the inventory groups and the host variables (any mapping per host: plain dicts or Ansible's hostvars), read with
get() so a variable a host does not have counts as unset, as Jinja's default() did.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.membership import as_int, cluster_hosts, retiring
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.secrets import redact
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model.pd_consistency import effective_settings

KINDS = ('prefill', 'decode')

# the typed settings of an engine: <kind>_NAME, else vllm_pd_NAME, else None
TYPED = ('served_model_name', 'dtype', 'kv_cache_dtype', 'block_size', 'max_model_len', 'quantization',
         'speculative_config')


def planned_engines(groups, hostvars, cluster):
    """One dict per engine host and kind of CLUSTER (prefill hosts first), what the fit and rollable checks compare:
    host, kind, tp, dp, pp, pcp (of its first instance, None without one), kv_connector_extra, model_path, address,
    model (vllm_pd_model_facts), model_read (whether this run read the host's model: not a host outside --limit),
    env (secret values hidden) and settings (pd_consistency.effective_settings; a
    ValueError names the host). A TypeError when an engine environment is no mapping."""
    out = []
    for kind in KINDS:
        for h in cluster_hosts(groups, hostvars, cluster, kind):
            hv = hostvars[h]
            typed = dict((name, hv.get(kind + '_' + name, hv.get('vllm_pd_' + name))) for name in TYPED)
            first = (hv.get('vllm_pd_instances', {}).get(kind, []) or [None])[0]
            env = hv.get(kind + '_env', hv.get('vllm_pd_engine_env', {}))
            if not hasattr(env, 'items'):
                raise TypeError('the environment must be a mapping, not a %s' % type(env).__name__)
            names = [str(n) for n in (hv.get('vllm_pd_secret_env_names', []) or []) if isinstance(n, str)]
            out.append({'host': h, 'kind': kind, 'tp': as_int(hv.get('vllm_pd_%s_tp_size' % kind)),
                        'dp': as_int(first['dp_size']) if first else None,
                        'pp': as_int(first['pp']) if first else None,
                        'pcp': as_int(first['pcp']) if first else None,
                        'kv_connector_extra': hv.get('vllm_pd_kv_connector_extra', {}),
                        'model_path': hv.get(kind + '_model', hv.get('vllm_pd_model', '')),
                        'address': hv.get('vllm_pd_address', {}).get('address', ''),
                        'model': hv.get('vllm_pd_model_facts', {}),
                        'model_read': 'vllm_pd_model_facts' in hv,
                        'env': redact(dict(env), names),
                        'settings': effective_settings(typed, hv.get(kind + '_extra_args', hv.get('vllm_pd_extra_args', [])),
                                                       'host %s %s' % (h, kind))})
    return out


def release_engines(groups, hostvars, cluster):
    """The release each engine of CLUSTER runs (vllm_pd_release[kind], read by the engine role) with host and kind,
    prefill hosts first; hosts being removed (vllm_pd_state absent) and hosts not read in this run are left out."""
    out = []
    for kind in KINDS:
        for h in cluster_hosts(groups, hostvars, cluster, kind):
            hv = hostvars[h]
            release = hv.get('vllm_pd_release', {})
            if not retiring(hv) and kind in release:
                out.append(dict(release[kind], host=h, kind=kind))
    return out


def restarting_roles(hosts):
    """The roles (prefill, decode; each once, in the order met) of the units of HOSTS (host variables, one mapping per
    host) that run (__preflight_active) and whose files this run changes (vllm_pd_changing_units)."""
    out = []
    for hv in hosts:
        active = hv.get('__preflight_active', [])
        for unit in hv.get('vllm_pd_changing_units', []):
            role = 'prefill' if unit.startswith('vllm-pd-prefill') else 'decode'
            if unit in active and role not in out:
                out.append(role)
    return out
