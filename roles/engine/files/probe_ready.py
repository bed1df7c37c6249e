import subprocess
import sys
import urllib.request
unit, url = sys.argv[1], sys.argv[2]
try:
    with urllib.request.urlopen(url, timeout=3) as r:
        print("ready" if r.status == 200 else "http-%d" % r.status)
        sys.exit(0)
except Exception as exc:
    state = subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True, check=False).stdout.strip()
    print("dead" if state in ("failed", "inactive") else "starting: %s (%s)" % (exc, state))
