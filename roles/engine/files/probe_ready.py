import subprocess
import sys
import time
import urllib.request

# probe_ready.py UNIT URL WINDOW: poll URL every 0.25 s for up to WINDOW seconds within this one call
# (one SSH round trip), and stop at once when the engine answers 200 or its unit is no longer running.
unit, url, window = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = time.monotonic() + window
while True:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            print("ready" if r.status == 200 else "http-%d" % r.status)
            sys.exit(0)
    except Exception as exc:  # pylint: disable=broad-except
        state = subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True, check=False).stdout.strip()
        if state in ("failed", "inactive"):
            print("dead")
            sys.exit(0)
        if time.monotonic() >= deadline:
            print("starting: %s (%s)" % (exc, state))
            sys.exit(0)
    time.sleep(0.25)
