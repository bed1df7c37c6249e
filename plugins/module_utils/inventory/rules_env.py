# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the engines' environment: the env file's keys and values, the names the collection pins, the
secret names, and one API key per cluster.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_windows import WINDOW_ENV
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.secrets import ENGINE_KEY
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.engine_env import ABORT_MOONCAKE, ABORT_NIXL
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_runtime import CONTROL
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_view import Finding, _engine_env, _is_port, hfind, is_list, show

ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What the engine role writes into every env file: an override in vllm_pd_engine_env would
# replace the pinned address (field report, fault 1) or the NPU selection. The names are the release table's
# (host_ip_env, engine_env_names: the same in every release it knows) and both abort-timeout names.
_UP = runtime(None)
_NAMES = _UP["engine_env_names"]
_ADDRESS = "vllm_pd_host_ip (or vllm_pd_network / vllm_pd_interface)"
_INTERFACE = "vllm_pd_interface (or vllm_pd_host_ip / vllm_pd_network)"
PINNED_ENV = {
    _UP["host_ip_env"]: _ADDRESS,
    _NAMES["hccl_if_ip"]: _ADDRESS,
    _NAMES["gloo_socket_ifname"]: _INTERFACE,
    _NAMES["tp_socket_ifname"]: _INTERFACE,
    _NAMES["hccl_socket_ifname"]: _INTERFACE,
    _NAMES["visible_devices"]: "prefill_devices / decode_devices",
    ABORT_MOONCAKE: "vllm_pd_abort_request_timeout",
    ABORT_NIXL: "vllm_pd_abort_request_timeout",
}
ENV_VARS = ("vllm_pd_engine_env", "prefill_env", "decode_env")


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
