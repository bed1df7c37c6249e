# shellcheck shell=sh
# The vllm-ascend and vLLM releases in the Python that runs the vllm binary $1: the interpreter of its
# #! line (pip's launcher for long paths: #!/bin/sh, then '''exec' PYTHON "$0" "$@"). Prints one JSON line.
b=$(command -v "$1") || { echo "$1 is not on PATH" >&2; exit 3; }
IFS= read -r line < "$b" || [ -n "$line" ] || { echo "cannot read $b" >&2; exit 4; }
case $line in '#!'*) ;; *) echo "$b has no #! line (not a Python entry point)" >&2; exit 4 ;; esac
py=${line#??}
case $py in
  */sh|*/sh\ *|*/bash|*/bash\ *) py=$(sed -n "2s/^'''exec' \\([^ ]*\\) .*/\\1/p" "$b") ;;
esac
[ -n "$py" ] || { echo "$b: no Python interpreter in its first lines" >&2; exit 4; }
# shellcheck disable=SC2086  # "/usr/bin/env python3" is two words
exec $py -c 'import json, sys
try:
    from importlib import metadata
except ImportError:
    import importlib_metadata as metadata
out = {"python": sys.executable}
for name in ("vllm-ascend", "vllm"):
    try:
        out[name] = metadata.version(name)
    except Exception:
        out[name] = None
print(json.dumps(out))'
