import json
import subprocess
import sys

# launch_read.py UNIT...: the command line each running unit's main process was started with, as
# {unit: [argv words]} (ChangeNotRollable compares it with the plan). Only the command line: the
# environment may hold secrets. A unit without a main process, or one that ended meanwhile, is left out.


def main(units):
    out = {}
    for unit in units:
        pid = subprocess.run(["systemctl", "show", "--property=MainPID", "--value", "--", unit],
                             capture_output=True, text=True, check=False).stdout.strip()
        if not pid.isdigit() or pid == "0":
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                words = f.read().split(b"\0")
        except OSError:
            continue
        out[unit] = [w.decode("utf-8", "replace") for w in words if w]
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
