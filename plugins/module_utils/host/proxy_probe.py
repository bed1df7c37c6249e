# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How module pd_host_read asks proxy_python whether it can run the proxy (the preflight's ProxyPythonUnfit): the
command (probe_argv), the script it runs (PROBE) and what its answer says (probe_answer). Pure functions."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime

# PROBE SCRIPT MIN_PYTHON [MODULE ...], run BY proxy_python (any Python 3, not the module's interpreter), so a
# script text: SCRIPT is the example proxy (empty: the mooncake wheel's proxy module, python -m, which is then the one
# MODULE); MIN_PYTHON is X.Y of the release table (empty when the release is not given); MODULE the release table's
# proxy_imports. The script's own imports count too: those at its top level and in its __main__ block, not those in
# a try (optional ones, e.g. vllm.logger and uvloop of 0.18.0). Prints {"python", "problems": [...]}.
PROBE = r'''import ast, importlib.util, json, sys


def required_imports(tree):
    out = []

    def walk(body):
        for node in body:
            if isinstance(node, ast.Import):
                out.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                out.append(node.module)
            elif isinstance(node, ast.If) and "__main__" in ast.dump(node.test):
                walk(node.body)
    walk(tree.body)
    return out


script, minimum, modules = sys.argv[1], sys.argv[2], list(sys.argv[3:])
problems = []
if minimum and sys.version_info[:2] < tuple(int(p) for p in minimum.split(".")):
    problems.append("it is Python %d.%d; the release's example proxy needs %s or newer" % (
        sys.version_info[0], sys.version_info[1], minimum))
if script:
    try:
        with open(script) as f:
            modules += required_imports(ast.parse(f.read(), script))
    except OSError as exc:
        problems.append("cannot read proxy_script %s: %s" % (script, exc.strerror))
    except SyntaxError as exc:
        problems.append("cannot parse proxy_script %s (line %s: %s): too old a Python for it" % (
            script, exc.lineno, exc.msg))
missing = []
for name in dict.fromkeys(modules):
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        missing.append(name)
if missing:
    problems.append("it cannot import %s" % ", ".join(missing))
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "problems": problems}))
'''


def probe_argv(python, script, min_python, modules):
    """The command that asks PYTHON whether it runs SCRIPT (empty: the mooncake wheel's proxy module, the release
    table's wheel_proxy_module); MIN_PYTHON and MODULES (the release table's proxy_python and proxy_imports) count
    only for an example proxy script."""
    if not script:
        min_python, modules = '', [runtime(None)['wheel_proxy_module']]
    return [python, '-c', PROBE, script, min_python or ''] + list(modules)


def probe_answer(rc, out, err, msg):
    """{python, problems} of the probe's answer; an interpreter that did not run (missing, not Python, crashed) is
    one problem naming why (its stderr or the error of starting it), so the preflight refuses it the same way."""
    if rc == 0:
        try:
            answer = json.loads(out)
            return dict(python=answer['python'], problems=list(answer['problems']))
        except (ValueError, KeyError, TypeError):
            pass
    why = (err or '').strip() or (msg or '').strip() or (out or '').strip() or 'it did not run (rc %s)' % rc
    return dict(python=None, problems=['it did not run: %s' % why[-300:]])
