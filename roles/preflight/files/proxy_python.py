import ast
import importlib.util
import json
import os
import sys

# proxy_python.py SCRIPT MIN_PYTHON [MODULE ...], run BY proxy_python: whether it can run the proxy. SCRIPT: the
# example proxy (empty: the mooncake wheel's, python -m mooncake.vllm_v1_proxy_server); MIN_PYTHON: X.Y of the
# release table (empty when the release is not given); MODULE: the release table's proxy_imports. The script's
# own imports count too: those at its top level and in its __main__ block, not those in a try (optional ones,
# e.g. vllm.logger and uvloop of 0.18.0). Prints {"python", "problems": [...], "front": ...}. With
# PD_PROXY_FRONT_BINARY=BINARY in its environment (proxy_front: haproxy) "front" is {"binary", "found"}: whether
# HAProxy is there to run the proxy tier (read in the same visit; else null).


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


def main(argv):
    script, minimum, modules = argv[0], argv[1], list(argv[2:])
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
    else:
        modules.append("mooncake.vllm_v1_proxy_server")
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
    binary = os.environ.get("PD_PROXY_FRONT_BINARY", "")
    front = {"binary": binary, "found": os.path.isfile(binary) and os.access(binary, os.X_OK)} if binary else None
    print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "problems": problems, "front": front}))


if __name__ == "__main__":
    main(sys.argv[1:])
