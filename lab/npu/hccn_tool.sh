#!/bin/sh
# Lab fake hccn_tool (docs/design.md "Lab NPU layer"). Fast path: the read-only queries
# `-i N -link|-net_health|-ip|-tls|... -g` answer from files npu_fake.py rendered from the state
# file (edit the state only with `npu_fake.py set`, which renders them again); everything else (ping, errors) is npu_fake.py itself.
o=/var/lib/vllm-pd-lab/npu-out
# (a file removed by a render between the test and cat: the Python path answers instead)
if [ $# -eq 4 ] && [ "$1" = -i ] && [ "$4" = -g ] && [ -f "$o/$2$3" ] && cat "$o/$2$3" 2>/dev/null; then
  exit 0
fi
exec /usr/local/lib/vllm-pd-lab/npu_fake.py hccn_tool "$@"
