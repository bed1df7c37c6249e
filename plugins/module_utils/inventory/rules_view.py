# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The view of the inventory every rule reads (ClusterView), the Finding it yields and the helpers the
rules share (inventory_rules.py: the view's data, the entry points).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# the inventory's whole numbers (a port, a count): the parser the proxy tier reads them with too; the rules import it from here
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.params import whole_number as as_int

KINDS = ("prefill", "decode")
DEFAULT_API_PORT = {"prefill": 8100, "decode": 8200}
DEFAULT_DP_RPC_PORT = {"prefill": 12342, "decode": 12352}
DEFAULT_PROXY_PORT = 8000
# Also written into Description= and used as a group key ('*' means every cluster).
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class Finding(object):
    """One error: where (cluster, host, variable), what is wrong and how to fix it.
    cluster '*' stops the whole rollout; a cluster's name stops that cluster only."""

    __slots__ = ("cluster", "host", "variable", "message", "fix", "check")

    def __init__(self, cluster, host, variable, message, fix, check="InventoryInvalid"):
        self.cluster, self.host, self.variable, self.message, self.fix = cluster or "*", host or "", \
            variable or "", message, fix
        # the check_names.py name; only a name other than InventoryInvalid can be ignored
        self.check = check

    @property
    def text(self):
        where = []
        if self.cluster != "*":
            where.append("cluster " + self.cluster)
        if self.host:
            where.append("host " + self.host)
        return (", ".join(where) + ": " if where else "") + self.message + (". Fix: " + self.fix if self.fix else "")

    def as_dict(self):
        return {"cluster": self.cluster, "host": self.host, "variable": self.variable,
                "message": self.message, "fix": self.fix, "text": self.text, "check": self.check}

    def __repr__(self):
        return "Finding(%r)" % self.text


def show(value):
    """A value as the operator wrote it (strings bare, the rest as Python/YAML-ish repr)."""
    if isinstance(value, str):
        return value
    return repr(value)


def is_list(value):
    return isinstance(value, (list, tuple))


class ClusterView(object):
    """The inventory as the rules see it (see the module docstring)."""

    def __init__(self, data):
        self.groups = dict((k, list(v or [])) for k, v in (data.get("groups") or {}).items())
        self.hostvars = data.get("hosts") or {}
        self.broken = [tuple(b) for b in data.get("broken") or []]
        self.rollout = data.get("rollout", "parallel")
        # the hosts this run targets (after --limit); None: every host
        self.targeted = data.get("targeted")
        self.prefill = self.groups.get("vllm_pd_prefill", [])
        self.decode = self.groups.get("vllm_pd_decode", [])
        self.proxy = self.groups.get("vllm_pd_proxy", [])
        self.hosts = []
        for h in self.prefill + self.decode + self.proxy:
            if h not in self.hosts:
                self.hosts.append(h)
        self.clusters = {}
        for h in self.hosts:
            c = self.cluster_of(h)
            if c:
                self.clusters.setdefault(c, []).append(h)

    def has(self, host, var):
        return var in self.hostvars.get(host, {})

    def get(self, host, var, default=None):
        return self.hostvars.get(host, {}).get(var, default)

    def first(self, host, *names, **kw):
        """(name, value) of the first defined of NAMES (role variable before the vllm_pd_ one)."""
        for n in names:
            if self.has(host, n):
                return n, self.get(host, n)
        return names[-1], kw.get("default")

    def cluster_of(self, host):
        v = self.get(host, "vllm_pd_cluster")
        if v is None or v == "" or isinstance(v, (bool, list, tuple, dict)):
            return ""
        v = str(v)
        return v if CLUSTER_NAME.match(v) else ""

    def key(self, host):
        """The group key of a host's findings: its cluster, or '*' when it has none."""
        return self.cluster_of(host) or "*"

    def kinds(self, host):
        return [k for k, g in (("prefill", self.prefill), ("decode", self.decode)) if host in g]

    def int_of(self, host, var, default=None):
        return as_int(self.get(host, var, default)) if self.has(host, var) else default


def hfind(view, host, variable, message, fix, check="InventoryInvalid"):
    return Finding(view.key(host), host, variable, message, fix, check)


def _ranks(raw):
    """A list of DP ranks (ints or digit strings), or None."""
    if not is_list(raw):
        return None
    out = [as_int(r) for r in raw]
    return None if None in out else out


def _engine_env(view, h, kind):
    """(variable, mapping) of the environment KIND's engines on H get (the role's <kind>_env before vllm_pd_engine_env)."""
    var, env = view.first(h, kind + "_env", "vllm_pd_engine_env", default={})
    return var, env if isinstance(env, dict) else {}


def _is_port(value):
    n = as_int(str(value).strip())
    return n is not None and 1 <= n <= 65535
