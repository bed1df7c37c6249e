# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of how the engines run: systemd or a container, the services the preflight may stop, and every
argv word a unit's ExecStart= gets.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_view import hfind, is_list, show

# the `vllm serve` options the rules name (the release table's serve_flags: the same in every release it knows)
_FLAG = releases.runtime(None)['serve_flags']

RUNTIMES = ("systemd", "container")
CONTAINER_ENGINES = ("podman", "docker")
# C0 controls and DEL: a newline in an argv word or env value would add lines (directives) to the file.
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# systemd's prefixes of an ExecStart= executable (-@:+!) change how it runs; '$' would be
# substituted in argv[0] but not in the path systemd executes.
EXEC_PREFIX = "-@:+!"
# Lists of argv words that end up in a unit's ExecStart=.
ARGV_LIST_VARS = ("vllm_pd_extra_args", "prefill_extra_args", "decode_extra_args",
                  "vllm_pd_container_run_options", "prefill_container_run_options",
                  "decode_container_run_options", "proxy_extra_args")
ENGINE_ARGS_VARS = ("vllm_pd_extra_args", "prefill_extra_args", "decode_extra_args")
# Single argv words; the executables among them must not look like systemd prefixes.
WORD_VARS = ("vllm_pd_model", "prefill_model", "decode_model", "vllm_pd_container_image",
             "prefill_container_image", "decode_container_image", "proxy_script")
EXEC_VARS = ("vllm_pd_vllm_binary", "prefill_vllm_binary", "decode_vllm_binary", "proxy_python")
MAPPING_VARS = ("vllm_pd_kv_connector_extra",)


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
                            "write it as a YAML list of strings, e.g. %s: [\"%s\", \"4096\"]" % (var, _FLAG["max_model_len"]))
                continue
            for i, word in enumerate(v):
                why = _word_problem(word)
                if why:
                    yield hfind(view, h, var, "%s[%d]=%r %s" % (var, i, word, why),
                                "make every element one plain string without control characters")
            if var in ENGINE_ARGS_VARS:
                # vLLM takes the key from VLLM_API_KEY as well (vllm/entrypoints/openai/api_server.py,
                # build_app: `args.api_key or envs.VLLM_API_KEY`; docs: openai_compatible_server.md)
                flag = _FLAG["api_key"]
                for word in v:
                    if isinstance(word, str) and (word == flag or word.startswith(flag + "=")):
                        yield hfind(view, h, var, "%s passes %s: the unit file that holds the argv is "
                                    "world-readable" % (var, flag),
                                    "remove %s and put VLLM_API_KEY in vllm_pd_engine_env (vLLM reads "
                                    "it; the env file is mode 0600)" % flag)
                        break
                flag = _FLAG["shutdown_timeout"]
                for word in v:
                    if isinstance(word, str) and (word == flag or word.startswith(flag + "=")):
                        yield hfind(view, h, var, "%s passes %s, which the roles set themselves (only "
                                    "where the installed vLLM has it, with systemd's stop timeout to match)" % (var, flag),
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
