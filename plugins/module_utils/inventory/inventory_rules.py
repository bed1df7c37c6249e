# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every cluster-wide rule of the inventory, as pure functions (the preflight runs them once,
on the controller, before any host is touched; filter pd_inventory_errors builds the view).

The view is plain data: {"groups": {group: [host, ...]}, "hosts": {host: {variable: value}},
"broken": [[host, variable, why], ...], "rollout": "parallel"}; a variable the inventory does not
define is absent. The reserved port windows come from each host's engine env
(port_windows.reserved_windows). Each rule takes a ClusterView and yields Findings. To add a rule, write
``def rule_x(view): yield Finding(...)`` and append it to RULES: nothing else changes.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import re

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.secrets import ENGINE_KEY
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import bench_settings
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import monitoring_ports as M
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import parallel
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_formula import group_bounds
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_windows import (
    DEFAULT_NPU_COUNT, HCCL_PORTS, WINDOW_ENV, reserved_windows,
)

KINDS = ("prefill", "decode")
ROLLOUTS = ("parallel", "serial", "canary", "rolling")
RUNTIMES = ("systemd", "container")
CONTAINER_ENGINES = ("podman", "docker")
DEFAULT_API_PORT = {"prefill": 8100, "decode": 8200}
DEFAULT_DP_RPC_PORT = {"prefill": 12342, "decode": 12352}
DEFAULT_PROXY_PORT = 8000

ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Also written into Description= and used as a group key ('*' means every cluster).
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
DIGITS = re.compile(r"^[0-9]+$")
# C0 controls and DEL: a newline in an argv word or env value would add lines (directives) to the file.
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# systemd's prefixes of an ExecStart= executable (-@:+!) change how it runs; '$' would be
# substituted in argv[0] but not in the path systemd executes.
EXEC_PREFIX = "-@:+!"

# What the engine role writes into every env file: an override in vllm_pd_engine_env would
# replace the pinned address (field report, fault 1) or the NPU selection.
PINNED_ENV = {
    "VLLM_HOST_IP": "vllm_pd_host_ip (or vllm_pd_network / vllm_pd_interface)",
    "HCCL_IF_IP": "vllm_pd_host_ip (or vllm_pd_network / vllm_pd_interface)",
    "GLOO_SOCKET_IFNAME": "vllm_pd_interface (or vllm_pd_host_ip / vllm_pd_network)",
    "TP_SOCKET_IFNAME": "vllm_pd_interface (or vllm_pd_host_ip / vllm_pd_network)",
    "HCCL_SOCKET_IFNAME": "vllm_pd_interface (or vllm_pd_host_ip / vllm_pd_network)",
    "ASCEND_RT_VISIBLE_DEVICES": "prefill_devices / decode_devices",
    "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT": "vllm_pd_abort_request_timeout",
    "VLLM_NIXL_ABORT_REQUEST_TIMEOUT": "vllm_pd_abort_request_timeout",
}

# Whole numbers >= 1; the ports also <= 65535.
PORT_VARS = ("vllm_pd_kv_port", "prefill_kv_port", "vllm_pd_decode_kv_port", "decode_kv_port",
             "prefill_api_port", "decode_api_port", "vllm_pd_proxy_port",
             "vllm_pd_prefill_dp_rpc_port", "vllm_pd_decode_dp_rpc_port")
COUNT_VARS = ("vllm_pd_prefill_tp_size", "vllm_pd_decode_tp_size", "vllm_pd_prefill_dp_size",
              "vllm_pd_decode_dp_size", "vllm_pd_prefill_pp_size", "vllm_pd_prefill_pcp_size",
              "vllm_pd_decode_pp_size", "vllm_pd_decode_pcp_size", "vllm_pd_npu_count", "vllm_pd_abort_request_timeout",
              "vllm_pd_ready_timeout")
# Whole numbers of seconds where 0 means "off".
SECONDS_VARS = ("vllm_pd_shutdown_timeout", "prefill_shutdown_timeout", "decode_shutdown_timeout")
# Lists of argv words that end up in a unit's ExecStart=.
ARGV_LIST_VARS = ("vllm_pd_extra_args", "prefill_extra_args", "decode_extra_args",
                  "vllm_pd_container_run_options", "prefill_container_run_options",
                  "decode_container_run_options", "proxy_extra_args")
ENGINE_ARGS_VARS = ("vllm_pd_extra_args", "prefill_extra_args", "decode_extra_args")
# Single argv words; the executables among them must not look like systemd prefixes.
WORD_VARS = ("vllm_pd_model", "prefill_model", "decode_model", "vllm_pd_container_image",
             "prefill_container_image", "decode_container_image", "proxy_script")
EXEC_VARS = ("vllm_pd_vllm_binary", "prefill_vllm_binary", "decode_vllm_binary", "proxy_python")
ENV_VARS = ("vllm_pd_engine_env", "prefill_env", "decode_env")
MAPPING_VARS = ("vllm_pd_kv_connector_extra",)
CONNECTION_VARS = ("ansible_host", "ansible_port", "ansible_connection", "ansible_ssh_port")

# Every variable a rule reads (the filter copies only these out of hostvars).
VARIABLES = tuple(sorted(set(
    ("vllm_pd_cluster", "vllm_pd_model", "vllm_pd_host_ip", "vllm_pd_network", "vllm_pd_interface",
     "vllm_pd_stop_services", "vllm_pd_runtime", "vllm_pd_container_engine", "vllm_pd_proxy_enabled",
     "prefill_runtime", "decode_runtime", "prefill_container_engine", "decode_container_engine",
     "vllm_pd_prefill_dp_ranks", "vllm_pd_decode_dp_ranks", "prefill_devices", "decode_devices",
     "vllm_pd_vllm_ascend_version", "vllm_pd_state", "vllm_pd_secret_env_names", M.VARIABLE)
    + PORT_VARS + COUNT_VARS + SECONDS_VARS + ARGV_LIST_VARS + WORD_VARS + EXEC_VARS + ENV_VARS + MAPPING_VARS
    + CONNECTION_VARS + tuple(bench_settings.SETTINGS) + bench_settings.OTHER_SETTINGS)))


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


def as_int(value):
    """A whole number written as an int or digits; None for anything else (bool, 'abc', 1.5, -3)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and DIGITS.match(value):
        return int(value)
    return None


def is_list(value):
    return isinstance(value, (list, tuple))


class ClusterView(object):
    """The inventory as the rules see it (see the module docstring)."""

    def __init__(self, data):
        self.groups = dict((k, list(v or [])) for k, v in (data.get("groups") or {}).items())
        self.hostvars = data.get("hosts") or {}
        self.broken = [tuple(b) for b in data.get("broken") or []]
        self.rollout = data.get("rollout", "parallel")
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


# ---------------------------------------------------------------- whole rollout


def rule_groups(view):
    if not view.prefill and not view.decode:
        yield Finding("*", "", "vllm_pd_prefill", "no hosts in groups vllm_pd_prefill / vllm_pd_decode",
                      "add them to the inventory")
    if view.rollout not in ROLLOUTS:
        yield Finding("*", "", "vllm_pd_rollout", "vllm_pd_rollout=%s is not one of %s"
                      % (show(view.rollout), ", ".join(ROLLOUTS)), "set it to one of them")


def rule_unevaluable(view):
    for host, var, why in view.broken:
        yield hfind(view, host, var, "%s cannot be evaluated (%s)" % (var, why),
                    "correct the variable or the template it refers to")


def rule_cluster_name(view):
    for h in view.hosts:
        v = view.get(h, "vllm_pd_cluster")
        if v is None or v == "":
            yield Finding("*", h, "vllm_pd_cluster", "vllm_pd_cluster is not set",
                          "put the host in a cluster group whose vars set vllm_pd_cluster")
        elif not view.cluster_of(h):
            yield Finding("*", h, "vllm_pd_cluster", "vllm_pd_cluster=%r is not a cluster name (letters, digits, "
                          "'.', '_', '-'; it names units and groups)" % (v,),
                          "rename the cluster, e.g. vllm_pd_cluster: a")


def rule_cluster_groups(view):
    """One host in two cluster_* groups (one vllm_pd_cluster wins silently), or a cluster_* group
    whose hosts disagree on vllm_pd_cluster."""
    cgroups = sorted(g for g in view.groups if g.startswith("cluster_"))
    for h in view.hosts:
        mine = [g for g in cgroups if h in view.groups[g]]
        if len(mine) > 1:
            yield Finding("*", h, "vllm_pd_cluster", "the host is in %d cluster groups (%s); ansible keeps one "
                          "vllm_pd_cluster=%s and one unit path for two configurations"
                          % (len(mine), ", ".join(mine), show(view.get(h, "vllm_pd_cluster"))),
                          "put the host in one cluster group only (one machine serves one cluster)")
    for g in cgroups:
        members = [h for h in view.groups[g] if h in view.hosts]
        values = {}
        for h in members:
            values.setdefault(str(view.get(h, "vllm_pd_cluster")), []).append(h)
        if len(values) > 1:
            yield Finding("*", "", "vllm_pd_cluster", "the hosts of group %s have different vllm_pd_cluster (%s)"
                          % (g, "; ".join("%s=%s" % (v, ",".join(hs)) for v, hs in sorted(values.items()))),
                          "set vllm_pd_cluster once in the group's vars, not per host")


def _machine(view, h):
    conn = str(view.get(h, "ansible_connection", "") or "")
    if conn == "local":
        return ("local",)
    addr = str(view.get(h, "ansible_host", h) or h)
    port = view.get(h, "ansible_port", view.get(h, "ansible_ssh_port", 22))
    return (conn or "ssh", addr, str(as_int(port) if as_int(port) is not None else port))


def rule_same_machine(view):
    """Two inventory hosts that reach one machine would write the same unit paths."""
    seen = {}
    for h in view.hosts:
        seen.setdefault(_machine(view, h), []).append(h)
    for key, hs in sorted(seen.items()):
        if len(hs) < 2:
            continue
        where = "ansible_host=%s port %s" % (key[1], key[2]) if len(key) == 3 else "ansible_connection=local"
        for c in sorted(set(view.key(h) for h in hs)):
            yield Finding(c, ", ".join(hs), "ansible_host", "inventory hosts %s are the same machine (%s): their "
                          "units and env files would overwrite each other" % (" and ".join(hs), where),
                          "keep one inventory host per machine; several roles on one machine are one host in "
                          "several groups (vllm_pd_prefill and vllm_pd_decode)")


# ---------------------------------------------------------------- per host


def rule_required(view):
    for h in view.hosts:
        for var in ("vllm_pd_model", "vllm_pd_kv_port", "vllm_pd_prefill_tp_size", "vllm_pd_decode_tp_size"):
            if not view.has(h, var):
                yield hfind(view, h, var, var + " is not set", "set it in the cluster group vars")
        if not (view.get(h, "vllm_pd_host_ip") or view.get(h, "vllm_pd_network") or view.get(h, "vllm_pd_interface")):
            yield hfind(view, h, "vllm_pd_network", "none of vllm_pd_network, vllm_pd_host_ip, vllm_pd_interface is "
                        "set, so VLLM_HOST_IP cannot be pinned (auto-detection picks the wrong NIC)",
                        "set vllm_pd_network to the inter-node CIDR")


def rule_numbers(view):
    for h in view.hosts:
        for var in PORT_VARS + COUNT_VARS:
            if not view.has(h, var):
                continue
            raw = view.get(h, var)
            n = as_int(raw)
            if n is None or n < 1:
                yield hfind(view, h, var, "%s=%s must be a positive integer" % (var, show(raw)),
                            "write it as a whole number, e.g. %s: %d" % (var, 8000 if var in PORT_VARS else 1))
            elif var in PORT_VARS and n > 65535:
                yield hfind(view, h, var, "%s=%d is outside the TCP ports 1-65535" % (var, n),
                            "choose a port below 65536")
        for var in SECONDS_VARS:
            if view.has(h, var) and as_int(view.get(h, var)) is None:
                yield hfind(view, h, var, "%s=%s must be a whole number of seconds (0 turns it off)"
                            % (var, show(view.get(h, var))), "write it as a whole number, e.g. %s: 60" % var)


def rule_vllm_ascend_version(view):
    """The release decides which abort-timeout variable the engines get (engine_env.abort_timeout_names)."""
    for h in view.hosts:
        raw = view.get(h, "vllm_pd_vllm_ascend_version")
        if raw is None or (isinstance(raw, str) and raw.strip() == ""):
            continue
        try:
            releases.parse_version(raw)
        except ValueError:
            yield hfind(view, h, "vllm_pd_vllm_ascend_version", "vllm_pd_vllm_ascend_version=%s is not a vllm-ascend "
                        "release" % show(raw), "write it as the release tag, e.g. v0.23.0 or v0.18.0rc1")


def rule_stop_services(view):
    for h in view.hosts:
        v = view.get(h, "vllm_pd_stop_services")
        if view.has(h, "vllm_pd_stop_services") and not (is_list(v) and all(isinstance(s, str) for s in v)):
            yield hfind(view, h, "vllm_pd_stop_services", "vllm_pd_stop_services must be a list of unit names, "
                        "e.g. [grafana-server]", "write it as a YAML list of strings")


def rule_runtime(view):
    """How each engine of the host runs: systemd (vllm on the host) or container (an image)."""
    for h in view.hosts:
        for kind in view.kinds(h):
            rvar, runtime = view.first(h, kind + "_runtime", "vllm_pd_runtime", default="systemd")
            runtime = show(runtime)
            if runtime not in RUNTIMES:
                yield hfind(view, h, rvar, "%s=%s is not one of systemd, container" % (rvar, runtime),
                            "set it to systemd (vllm on the host) or container (the engine image)")
                continue
            if runtime != "container":
                continue
            ivar, image = view.first(h, kind + "_container_image", "vllm_pd_container_image", default="")
            if not image:
                yield hfind(view, h, ivar, "%s is container but %s is not set" % (rvar, ivar),
                            "set %s to the engine image (e.g. the vllm-ascend image) present on the host" % ivar)
            evar, engine = view.first(h, kind + "_container_engine", "vllm_pd_container_engine", default="podman")
            if engine not in CONTAINER_ENGINES:
                yield hfind(view, h, evar, "%s=%s is not one of podman, docker" % (evar, show(engine)),
                            "set it to the engine that runs the image")
            # a run option that is not a list of words: rule_argv_words


def _word_problem(word):
    """Why WORD cannot be one argv word of a unit, or None."""
    if isinstance(word, bool) or not isinstance(word, (str, int, float)):
        return "is %s, not a string" % type(word).__name__
    m = CONTROL.search(str(word))
    if m:
        return "holds the control character %r (a newline would add lines, even directives, to the unit)" % m.group()
    return None


def rule_argv_words(view):
    """Everything that becomes a word of ExecStart=: systemd quoting makes '%', '$', quotes and spaces
    safe (filter pd_systemd_argv), control characters cannot be made safe."""
    for h in view.hosts:
        for var in ARGV_LIST_VARS:
            if not view.has(h, var):
                continue
            v = view.get(h, var)
            if not is_list(v):
                yield hfind(view, h, var, "%s must be a list of argv words (one list element per word), "
                            "not a %s (%s)" % (var, type(v).__name__, show(v)),
                            "write it as a YAML list of strings, e.g. %s: [\"--max-model-len\", \"4096\"]" % var)
                continue
            for i, word in enumerate(v):
                why = _word_problem(word)
                if why:
                    yield hfind(view, h, var, "%s[%d]=%r %s" % (var, i, word, why),
                                "make every element one plain string without control characters")
            if var in ENGINE_ARGS_VARS:
                # vLLM takes the key from VLLM_API_KEY as well (vllm/entrypoints/openai/api_server.py,
                # build_app: `args.api_key or envs.VLLM_API_KEY`; docs: openai_compatible_server.md)
                for word in v:
                    if isinstance(word, str) and (word == "--api-key" or word.startswith("--api-key=")):
                        yield hfind(view, h, var, "%s passes --api-key: the unit file that holds the argv is "
                                    "world-readable" % var,
                                    "remove --api-key and put VLLM_API_KEY in vllm_pd_engine_env (vLLM reads "
                                    "it; the env file is mode 0600)")
                        break
                for word in v:
                    if isinstance(word, str) and (word == "--shutdown-timeout" or word.startswith("--shutdown-timeout=")):
                        yield hfind(view, h, var, "%s passes --shutdown-timeout, which the roles set themselves (only "
                                    "where the installed vLLM has it, with systemd's stop timeout to match)" % var,
                                    "remove it and set vllm_pd_shutdown_timeout (or prefill_/decode_shutdown_timeout)")
                        break
        for var in WORD_VARS + EXEC_VARS:
            if not view.has(h, var):
                continue
            v = view.get(h, var)
            why = _word_problem(v)
            if why:
                yield hfind(view, h, var, "%s=%r %s" % (var, v, why), "make it one plain string")
            elif var in EXEC_VARS and (str(v)[:1] in EXEC_PREFIX or "$" in str(v) or not str(v)):
                yield hfind(view, h, var, "%s=%r cannot be an executable of ExecStart= (empty, starts with one of "
                            "systemd's prefixes %s, or holds '$')" % (var, v, EXEC_PREFIX),
                            "give the path of the executable, e.g. /usr/local/bin/vllm")
        for var in MAPPING_VARS:
            if view.has(h, var) and not isinstance(view.get(h, var), dict):
                yield hfind(view, h, var, "%s=%s must be a mapping (it becomes kv_connector_extra_config), not a %s"
                            % (var, show(view.get(h, var)), type(view.get(h, var)).__name__),
                            "write it as a YAML mapping, e.g. %s: {prefill: {pp_layer_partition: '31,30'}}" % var)


def _container_host(view, h):
    return any(show(view.first(h, k + "_runtime", "vllm_pd_runtime", default="systemd")[1]) == "container"
               for k in view.kinds(h))


def rule_engine_env(view):
    """vllm_pd_engine_env: written to the 0600 env file, one KEY=VALUE a line. Messages name the key,
    never the value (it may be a secret)."""
    for h in view.hosts:
        literal = _container_host(view, h)
        for var in ENV_VARS:
            if not view.has(h, var):
                continue
            env = view.get(h, var)
            if not isinstance(env, dict):
                yield hfind(view, h, var, "%s=%s must be a mapping of environment variables, not a %s"
                            % (var, show(env), type(env).__name__),
                            "write it as a YAML mapping, e.g. %s: {HF_HUB_OFFLINE: \"1\"}" % var)
                continue
            for key in sorted(env, key=str):
                value = env[key]
                if not isinstance(key, str) or not ENV_KEY.match(key):
                    yield hfind(view, h, var, "%s key %r is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
                                % (var, key), "rename the key")
                    continue
                if key in PINNED_ENV:
                    yield hfind(view, h, var, "%s sets %s, which the collection pins (it would override the value "
                                "the preflight checked)" % (var, key),
                                "remove %s from %s and set %s instead" % (key, var, PINNED_ENV[key]))
                    continue
                if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                    yield hfind(view, h, var, "%s.%s is a %s, not a string" % (var, key, type(value).__name__),
                                "quote the value, e.g. %s: \"1\"" % key)
                    continue
                value = str(value)
                if key in WINDOW_ENV and not _is_port(value):
                    yield hfind(view, h, var, "%s.%s=%s is not a port 1-65535 (it moves a port window the Ascend "
                                "transports bind from)" % (var, key, value), "give a port number 1-65535")
                    continue
                m = CONTROL.search(value.replace("\t", ""))
                if m:
                    yield hfind(view, h, var, "%s.%s holds the control character %r (a newline would add variables "
                                "to the env file)" % (var, key, m.group()), "remove it from the value")
                elif literal and (value != value.strip(" \t") or "\\" in value or value[:1] in "'\""):
                    yield hfind(view, h, var, "%s.%s cannot be passed with --env-file (podman and docker read "
                                "the value literally, systemd strips or unquotes it)" % (var, key),
                                "drop the leading/trailing blanks, backslashes and leading quote from the value")


def _is_port(value):
    n = as_int(str(value).strip())
    return n is not None and 1 <= n <= 65535


def rule_port_windows(view):
    """The windows the engine env moves (ASCEND_BASE_PORT, MC_MIN/MAX_RPC_PORT, HCCL_IF_BASE_PORT) must make sense
    together: the preflight, the start guard and the doctor read them with port_windows.reserved_windows."""
    for h in view.hosts:
        for kind in view.kinds(h):
            var, env = _engine_env(view, h, kind)
            if not all(_is_port(env[k]) for k in WINDOW_ENV if k in env):
                continue  # a value that is not a port: rule_engine_env
            try:
                reserved_windows(env, 0)
            except ValueError as exc:
                yield hfind(view, h, var, "%s: %s" % (var, exc), "keep MC_MIN_RPC_PORT at or below MC_MAX_RPC_PORT "
                            "and HCCL_IF_BASE_PORT at or below %d" % (65536 - HCCL_PORTS))


def _message_fix(text, default_fix=""):
    """'WHAT. Fix: HOW' (parallel.py's sentences) -> (WHAT, HOW)."""
    what, _sep, fix = text.partition(". Fix: ")
    return what, fix or default_fix


def rule_parallel_sizes(view):
    """Pipeline and prefill context parallel sizes: one value per side (variable or extra args, equal if both),
    what the release's connector can serve, the same on every host of a side, and a user
    kv_connector_extra_config that agrees with them (parallel.py)."""
    for name, members in sorted(view.clusters.items()) + [("", [h for h in view.hosts if not view.cluster_of(h)])]:
        plan = {}
        for kind, group in (("prefill", view.prefill), ("decode", view.decode)):
            seen = {}
            for h in [x for x in members if x in group]:
                args_var, args = view.first(h, kind + "_extra_args", "vllm_pd_extra_args", default=[])
                if not is_list(args):
                    continue  # rule_argv_words
                pp_var, pcp_var = parallel.VARIABLE % (kind, "pp"), parallel.VARIABLE % (kind, "pcp")
                if as_int(view.get(h, pp_var, 1)) is None or as_int(view.get(h, pcp_var, 1)) is None:
                    continue  # rule_numbers
                try:
                    sizes = parallel.side_sizes(kind, args, view.get(h, pp_var), view.get(h, pcp_var), args_var)
                except ValueError as exc:
                    what, fix = _message_fix(str(exc), "write the size as a whole number after the option")
                    yield hfind(view, h, pp_var if pp_var in what or "pipeline" in what else pcp_var, what, fix)
                    continue
                why = parallel.release_problem(kind, sizes["pp"], sizes["pcp"], view.get(h, "vllm_pd_vllm_ascend_version"))
                if why:
                    yield hfind(view, h, pp_var if sizes["pp"] > 1 else pcp_var, *_message_fix(why))
                seen.setdefault((sizes["pp"], sizes["pcp"]), []).append(h)
            if len(seen) > 1:
                yield Finding(name, "", parallel.VARIABLE % (kind, "pp"), "the %s hosts launch with different pipeline/"
                              "context parallel sizes (%s); D reads one prefill.pp_size for all of them" % (kind, "; ".join(
                                  "pp %d pcp %d on %s" % (k[0], k[1], ", ".join(v)) for k, v in sorted(seen.items()))),
                              "set vllm_pd_%s_pp_size / vllm_pd_%s_pcp_size (or the extra args) once in the cluster "
                              "group vars" % (kind, kind))
            elif seen:
                plan[kind] = list(seen)[0]
        if "prefill" not in plan:
            continue
        for h in members:
            user = view.get(h, "vllm_pd_kv_connector_extra")
            tp = view.int_of(h, "vllm_pd_prefill_tp_size")
            prefill = {"pp_size": plan["prefill"][0]}
            if tp:
                prefill["tp_size"] = tp
            decode = {"pp_size": 1}
            if view.int_of(h, "vllm_pd_decode_tp_size"):
                decode["tp_size"] = view.int_of(h, "vllm_pd_decode_tp_size")
            why = parallel.extra_config_problem(user, prefill, decode)
            if why:
                yield hfind(view, h, "vllm_pd_kv_connector_extra", *_message_fix(why))


def rule_secret_env_names(view):
    """vllm_pd_secret_env_names: names (or shell patterns) whose values are never shown, on top of the defaults."""
    for h in view.hosts:
        if not view.has(h, "vllm_pd_secret_env_names"):
            continue
        v = view.get(h, "vllm_pd_secret_env_names")
        if not is_list(v) or not all(isinstance(n, str) and n for n in v):
            yield hfind(view, h, "vllm_pd_secret_env_names", "vllm_pd_secret_env_names must be a list of variable "
                        "names or shell patterns, not %s" % show(v),
                        "write it as a YAML list of strings, e.g. vllm_pd_secret_env_names: [MY_CREDENTIALS, \"*_CERT\"]")


def rule_api_key(view):
    """Every engine of a cluster needs the same VLLM_API_KEY: P and D are each other's clients (the proxy sends one
    OPENAI_API_KEY to both, the probes and smoke one key). Messages tell the keys apart by letter, never by value."""
    for name, members in sorted(view.clusters.items()):
        seen, where = [], []
        for kind, group in (("prefill", view.prefill), ("decode", view.decode)):
            for h in members:
                if h not in group:
                    continue
                var, env = _engine_env(view, h, kind)
                key = env.get(ENGINE_KEY)
                key = str(key) if key not in (None, "") else None
                if key not in seen:
                    seen.append(key)
                where.append((key, "%s (%s, %s)" % (h, kind, var)))
        if len(seen) < 2:
            continue
        labels = dict((k, "unset" if k is None else "key %s" % "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[i % 26])
                      for i, k in enumerate(k for k in seen if k is not None))
        labels[None] = "unset"
        parts = ["%s on %s" % (labels[k], ", ".join(w for kk, w in where if kk == k)) for k in seen]
        yield Finding(name, "", "vllm_pd_engine_env",
                      "%s differs between the engines of the cluster: %s (values not shown). vLLM then answers HTTP "
                      "401 to the proxy, the probes and the smoke request on some of them" % (ENGINE_KEY, "; ".join(parts)),
                      "set %s once for the cluster in vllm_pd_engine_env of its group vars, and remove it from "
                      "prefill_env/decode_env and host vars of the hosts named" % ENGINE_KEY)


def _ranks(raw):
    """A list of DP ranks (ints or digit strings), or None."""
    if not is_list(raw):
        return None
    out = [as_int(r) for r in raw]
    return None if None in out else out


def rule_host_layout(view):
    """Ports and NPUs of everything one host runs must not collide (several roles on one host)."""
    for h in view.hosts:
        kv = view.int_of(h, "prefill_kv_port") if view.has(h, "prefill_kv_port") else view.int_of(h, "vllm_pd_kv_port")
        p_tp, d_tp = view.int_of(h, "vllm_pd_prefill_tp_size"), view.int_of(h, "vllm_pd_decode_tp_size")
        dps = dict((k, view.int_of(h, "vllm_pd_%s_dp_size" % k, 1)) for k in KINDS)
        if not all(x for x in (kv, p_tp, d_tp, dps["prefill"], dps["decode"])):
            continue  # missing or not a number: reported by rule_required / rule_numbers
        tps = {"prefill": p_tp, "decode": d_tp}
        # a DP rank takes tp*pp*pcp ports of the group and as many NPUs (bad sizes: rule_parallel_sizes)
        sizes = dict((k, (tps[k],) + _pp_pcp(view, h, k)) for k in KINDS)
        ext, served = {}, {}
        for kind in KINDS:
            dp = dps[kind]
            var = "vllm_pd_%s_dp_ranks" % kind
            raw = view.get(h, var, [])
            ranks = _ranks(raw)
            if ranks is None:
                yield hfind(view, h, var, "%s=%s must be a list of DP ranks, e.g. [0, 1]" % (var, show(raw)),
                            "write the ranks this host serves as a YAML list")
                ranks = []
            if len(set(ranks)) != len(ranks):
                yield hfind(view, h, var, "%s=%s lists a rank twice" % (var, ranks), "list each rank once")
            if [r for r in ranks if r >= dp]:
                yield hfind(view, h, var, "%s=%s has rank(s) outside 0-%d (vllm_pd_%s_dp_size=%d)"
                            % (var, ranks, dp - 1, kind, dp), "use ranks below the DP size")
            uniq = []
            for r in ranks:
                if r not in uniq:
                    uniq.append(r)
            ext[kind] = uniq
            served[kind] = uniq or list(range(dp))
        first, last = min(served["prefill"]), max(served["prefill"])
        lo, hi = group_bounds(kv, *sizes["prefill"], dp_rank_start=first, dp_size_local=last - first + 1)[:2]
        ports = []
        for kind in view.kinds(h):
            base = view.int_of(h, kind + "_api_port", DEFAULT_API_PORT[kind])
            for k in range(max(len(ext[kind]), 1)):
                ports.append((kind + "_api_port" + (" + %d" % k if k else ""), (base or 0) + k))
            if 0 in ext[kind]:
                var = "vllm_pd_%s_dp_rpc_port" % kind
                ports.append((var, view.int_of(h, var, DEFAULT_DP_RPC_PORT[kind]) or 0))
        if h in view.prefill and (lo < 1024 or hi > 65535):
            yield hfind(view, h, "vllm_pd_kv_port", "the prefill port group %d-%d (vllm_pd_kv_port + dp_rank*tp*pp*pcp "
                        ".. + tp*pp*pcp-1) leaves 1024-65535" % (lo, hi),
                        "choose vllm_pd_kv_port so the whole group fits")
        if h in view.proxy:
            ports.append(("vllm_pd_proxy_port", view.int_of(h, "vllm_pd_proxy_port", DEFAULT_PROXY_PORT) or 0))
        seen = {}
        for name, port in ports:
            if port < 1:
                continue  # not a number: rule_numbers
            if port > 65535:
                yield hfind(view, h, name.split(" ")[0], "%s=%d is outside the TCP ports 1-65535" % (name, port),
                            "choose a lower port")
            for group_rank in served["prefill"] if h in view.prefill else []:
                start, end = group_bounds(kv, *sizes["prefill"], dp_rank_start=group_rank)[:2]
                if start <= port <= end:
                    yield hfind(view, h, name.split(" ")[0], "%s=%d lies inside the prefill port group of DP rank %d "
                                "(%d-%d)" % (name, port, group_rank, start, end), "move %s or vllm_pd_kv_port" % name)
            if port in seen:
                yield hfind(view, h, name.split(" ")[0], "%s and %s are both %d on one host" % (seen[port], name, port),
                            "give each a port of its own")
            seen[port] = name
        devs = {}
        for kind in view.kinds(h):
            raw = view.get(h, kind + "_devices", [])
            ids = _ranks(raw)
            if ids is None:
                yield hfind(view, h, kind + "_devices", "%s_devices=%s must be a list of NPU ids, e.g. [0, 1]"
                            % (kind, show(raw)), "write the NPU ids as a YAML list of numbers")
                continue
            need = group_bounds(0, *sizes[kind], dp_size_local=len(served[kind])).size
            devs[kind] = (ids or list(range(need)), need)
        if "prefill" in devs and "decode" in devs:
            shared = [d for d in devs["prefill"][0] if d in devs["decode"][0]]
            if shared:
                yield hfind(view, h, "prefill_devices", "prefill and decode on one host share NPUs %s"
                            % ",".join(str(d) for d in shared),
                            "set prefill_devices and decode_devices to disjoint lists")
        npus = view.int_of(h, "vllm_pd_npu_count")
        for kind in KINDS:
            if kind not in devs or not devs[kind][0]:
                continue
            ids, need = devs[kind]
            if len(ids) != need:
                yield hfind(view, h, kind + "_devices", "%s_devices has %d NPU ids but tp*pp*pcp x the DP ranks this "
                            "host serves is %d" % (kind, len(ids), need), "list exactly %d ids" % need)
            if npus and max(ids) >= npus:
                yield hfind(view, h, kind + "_devices", "%s uses NPU %d but the host has vllm_pd_npu_count=%d "
                            "(ids 0-%d)" % (kind, max(ids), npus, npus - 1),
                            "lower tp/dp or set %s_devices" % kind)


def _engine_env(view, h, kind):
    """(variable, mapping) of the environment KIND's engines on H get (the role's <kind>_env before vllm_pd_engine_env)."""
    var, env = view.first(h, kind + "_env", "vllm_pd_engine_env", default={})
    return var, env if isinstance(env, dict) else {}


def _pp_pcp(view, h, kind):
    """(pp, pcp) of KIND's engines on H; (1, 1) when they cannot be read (rule_parallel_sizes names why)."""
    _var, args = view.first(h, kind + "_extra_args", "vllm_pd_extra_args", default=[])
    try:
        sizes = parallel.side_sizes(kind, args if is_list(args) else [], view.get(h, "vllm_pd_%s_pp_size" % kind),
                                    view.get(h, "vllm_pd_%s_pcp_size" % kind))
    except ValueError:
        return 1, 1
    return sizes["pp"], sizes["pcp"]


def _windows(view, h, kind, npus):
    """port_windows.reserved_windows of KIND's engine env on H (None when a value is bad: rule_engine_env says so)."""
    try:
        return reserved_windows(_engine_env(view, h, kind)[1], npus)
    except ValueError:
        return None


def rule_monitoring_ports(view):
    """The operator's monitoring ports stay out of every group, API/proxy port and reserved window of
    the host (monitoring_ports.py); values that are not numbers are rule_numbers' findings."""
    for h in view.hosts:
        raw = view.get(h, M.VARIABLE, list(M.DEFAULT_MONITORING_PORTS))
        monitoring, why = M.parse_ports(raw)
        if why:
            yield hfind(view, h, M.VARIABLE, why, "write a YAML list of the ports your monitoring services listen on")
            continue
        taken = []
        kinds = view.kinds(h)
        for kind in kinds:
            kv = view.int_of(h, "prefill_kv_port") if view.has(h, "prefill_kv_port") else view.int_of(h, "vllm_pd_kv_port")
            tp, dp = view.int_of(h, "vllm_pd_%s_tp_size" % kind), view.int_of(h, "vllm_pd_%s_dp_size" % kind, 1)
            ranks = _ranks(view.get(h, "vllm_pd_%s_dp_ranks" % kind, []))
            api = view.int_of(h, kind + "_api_port", DEFAULT_API_PORT[kind])
            rpc = view.int_of(h, "vllm_pd_%s_dp_rpc_port" % kind, DEFAULT_DP_RPC_PORT[kind])
            if not all((kv, tp, dp, api)) or ranks is None:
                continue
            pp, pcp = _pp_pcp(view, h, kind)
            taken += M.engine_taken(kind, kv, tp, dp, sorted(set(ranks)), api, rpc, pp=pp, pcp=pcp)
        npus = view.int_of(h, "vllm_pd_npu_count", DEFAULT_NPU_COUNT) or DEFAULT_NPU_COUNT
        for kind in kinds:
            win = _windows(view, h, kind, npus)
            for t in M.windows_taken(win) if win else []:
                if t not in taken:
                    taken.append(t)
        if h in view.proxy:
            port = view.int_of(h, "vllm_pd_proxy_port", DEFAULT_PROXY_PORT)
            if port:
                taken.append((port, port, "the proxy port %d (vllm_pd_proxy_port)" % port, "or change vllm_pd_proxy_port"))
        for _port, message, fix in M.collisions(monitoring, taken):
            yield hfind(view, h, M.VARIABLE, message, fix, M.CHECK)


# ---------------------------------------------------------------- per cluster


def _same(value):
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


def rule_cluster_sides(view):
    for name, members in sorted(view.clusters.items()):
        ps = [h for h in members if h in view.prefill]
        ds = [h for h in members if h in view.decode]
        if not ps or not ds:
            yield Finding(name, "", "vllm_pd_prefill", "needs at least one prefill and one decode host (has P=%s, D=%s)"
                          % (ps, ds), "add the missing side to vllm_pd_prefill / vllm_pd_decode with "
                          "vllm_pd_cluster=%s" % name)


def rule_cluster_agrees(view):
    """P and D of a cluster must launch with the same kv_connector_extra_config and model."""
    for name, members in sorted(view.clusters.items()):
        for var in ("vllm_pd_prefill_tp_size", "vllm_pd_prefill_dp_size", "vllm_pd_decode_tp_size",
                    "vllm_pd_decode_dp_size", "vllm_pd_model", "vllm_pd_kv_connector_extra"):
            values = []
            for h in members:
                v = _same(view.get(h, var, 1))
                if v not in values:
                    values.append(v)
            if len(values) > 1:
                yield Finding(name, "", var, "%s differs between its hosts (%s); P and D must agree on "
                              "kv_connector_extra_config" % (var, ", ".join(values)),
                              "set it once in the cluster group vars")


def rule_external_dp(view):
    """External DP: the ranks listed on a side's hosts cover 0 .. dp_size-1, each on one host."""
    for name, members in sorted(view.clusters.items()):
        for kind, group in (("prefill", view.prefill), ("decode", view.decode)):
            hosts = [h for h in members if h in group]
            if not hosts:
                continue
            var = "vllm_pd_%s_dp_ranks" % kind
            dp = view.int_of(hosts[0], "vllm_pd_%s_dp_size" % kind, 1)
            owner, without = {}, []
            for x in hosts:
                rs = _ranks(view.get(x, var, [])) or []
                if not rs:
                    without.append(x)
                for r in sorted(set(rs), key=rs.index):
                    if r in owner:
                        yield Finding(name, "", var, "%s DP rank %d is listed on %s and %s (%s)"
                                      % (kind, r, owner[r], x, var), "give each rank to one host")
                    owner[r] = x
            if owner and without:
                yield Finding(name, "", var, "%s set %s (external DP) but %s do(es) not"
                              % (", ".join(sorted(set(owner.values()), key=hosts.index)), var, ", ".join(without)),
                              "list the DP ranks of every %s host of the cluster" % kind)
            missing = [str(r) for r in range(dp or 0) if r not in owner]
            if owner and dp and missing:
                yield Finding(name, "", var, "%s DP rank(s) %s of vllm_pd_%s_dp_size=%d are served by no host"
                              % (kind, ", ".join(missing), kind, dp),
                              "add them to %s of a %s host of the cluster" % (var, kind))


def rule_tp_ratio(view):
    for name, members in sorted(view.clusters.items()):
        h = members[0]
        p, d = view.int_of(h, "vllm_pd_prefill_tp_size"), view.int_of(h, "vllm_pd_decode_tp_size")
        if not p or not d:
            continue
        if p < d:
            yield Finding(name, "", "vllm_pd_prefill_tp_size", "vllm_pd_prefill_tp_size=%d is smaller than "
                          "vllm_pd_decode_tp_size=%d; vLLM-Ascend refuses prefill tp < decode tp at startup" % (p, d),
                          "raise the prefill tp or lower the decode tp")
        elif p % d:
            yield Finding(name, "", "vllm_pd_prefill_tp_size", "vllm_pd_prefill_tp_size=%d is not a multiple of "
                          "vllm_pd_decode_tp_size=%d (required for non-MLA models)" % (p, d),
                          "choose tp sizes where prefill is a multiple of decode")


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


def rule_benchmark(view):
    """The benchmark's settings (bench_settings.settings_problems), where a proxy host reads them."""
    names = tuple(bench_settings.SETTINGS) + bench_settings.OTHER_SETTINGS
    for h in view.proxy:
        values = dict((n, view.get(h, n)) for n in names if view.has(h, n))
        for var, message, fix in bench_settings.settings_problems(values):
            yield hfind(view, h, var, message, fix)


def rule_state(view):
    """vllm_pd_state: absent retires a host (drained out of the proxy, then stopped, its files removed);
    the cluster must keep a serving side of each kind and its proxy."""
    for name, members in sorted(view.clusters.items()):
        present = []
        for h in members:
            v = view.get(h, "vllm_pd_state", "present")
            if v not in ("present", "absent"):
                yield Finding(name, h, "vllm_pd_state", "vllm_pd_state=%s is not present or absent" % show(v),
                              "write present (the default) or absent (drain, stop and remove this host's instances)")
            elif v == "absent" and h in view.proxy:
                yield Finding(name, h, "vllm_pd_state", "vllm_pd_state is absent on the cluster's proxy host, so the "
                              "proxy would go away with it", "move the proxy to a host that stays (group vllm_pd_proxy) "
                              "in one run, then retire this host in the next")
            elif v != "absent":
                present.append(h)
        for kind, group in (("prefill", view.prefill), ("decode", view.decode)):
            if any(h in group for h in members) and not any(h in group for h in present):
                yield Finding(name, "", "vllm_pd_state", "every %s host of the cluster has vllm_pd_state: absent, so "
                              "nothing would serve that side" % kind,
                              "keep one %s host present, or stop the cluster with stop_pd.yml" % kind)


# The order findings are reported in. Later cluster-wide checks (P/D consistency) go here.
RULES = [
    rule_groups, rule_unevaluable, rule_cluster_name, rule_cluster_groups, rule_same_machine,
    rule_required, rule_numbers, rule_vllm_ascend_version, rule_stop_services, rule_runtime, rule_argv_words, rule_engine_env,
    rule_port_windows, rule_parallel_sizes, rule_secret_env_names, rule_host_layout, rule_monitoring_ports,
    rule_cluster_sides, rule_cluster_agrees, rule_api_key, rule_external_dp, rule_tp_ratio, rule_proxy, rule_benchmark,
    rule_state,
]


def inventory_findings(data, rules=None):
    """All Findings of the inventory DATA (see the module docstring), in RULES order, without repeats."""
    view = data if isinstance(data, ClusterView) else ClusterView(data)
    out, seen = [], set()
    for rule in RULES if rules is None else rules:
        for f in rule(view):
            if f.text not in seen:
                seen.add(f.text)
                out.append(f)
    return out


def inventory_errors(data, rules=None):
    """The findings as dicts (cluster, host, variable, message, fix, text)."""
    return [f.as_dict() for f in inventory_findings(data, rules)]
