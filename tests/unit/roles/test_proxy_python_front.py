"""roles/preflight/files/proxy_python.py: with PD_PROXY_FRONT_BINARY (proxy_front: haproxy) the same visit says
whether that binary is there and executable (ProxyFrontMissing); without it, "front" is null."""
import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "roles" / "preflight" / "files" / "proxy_python.py"


def front(tmp_path, binary):
    env = dict((k, v) for k, v in os.environ.items() if k != "PD_PROXY_FRONT_BINARY")
    if binary is not None:
        env["PD_PROXY_FRONT_BINARY"] = binary
    out = subprocess.run([sys.executable, str(SCRIPT), "", "", "json"], capture_output=True, text=True, check=True,
                         env=env, cwd=tmp_path).stdout
    return json.loads(out)["front"]


def test_the_front_binary_is_found_only_when_it_can_run(tmp_path):
    exe = tmp_path / "haproxy"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert front(tmp_path, str(exe)) == {"binary": str(exe), "found": True}
    exe.chmod(0o644)
    assert front(tmp_path, str(exe))["found"] is False
    assert front(tmp_path, str(tmp_path / "missing"))["found"] is False
    assert front(tmp_path, None) is None
