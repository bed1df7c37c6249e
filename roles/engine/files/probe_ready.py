import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

# On a host the role puts these module_utils in front of this script (filter pd_host_script).
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.secrets import api_key_of_file

# probe_ready.py UNIT URL WINDOW [MODELS_URL [ENV_FILE]]: poll URL every 0.25 s for up to WINDOW seconds within this
# one call (one SSH round trip), and stop at once when the engine answers 200 or its unit is no longer
# running. Once URL answers 200, MODELS_URL (/v1/models) must answer 200 listing a model: checked in the
# same call, a module run less per engine (issue 16). Prints one line: ready, dead, unlisted: WHY (the
# engine is up but lists no model; final), or starting: WHY (poll again).
# With VLLM_API_KEY in ENV_FILE (the engine's 0600 environment file) vLLM answers 401 under /v1 without
# "Authorization: Bearer KEY" (/health is open): the key is read here, never passed on a command line.


def models_problem(url, key=""):
    """None when url answers 200 with a non-empty data list, else what is wrong."""
    headers = {"Authorization": "Bearer " + key} if key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            body = r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            return "GET %s answered HTTP 401 (%s): the engine's VLLM_API_KEY and the key sent differ" % (
                url, "a key was sent" if key else "no key was sent, none in the environment file")
        return "GET %s answered HTTP %d" % (url, exc.code)
    except Exception as exc:  # pylint: disable=broad-except
        return "GET %s failed: %s" % (url, exc)
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):
        data = None
    return None if isinstance(data, list) and data else "GET %s listed no model: %s" % (url, body[:200])


def main(argv):
    unit, url, window = argv[1], argv[2], float(argv[3])
    models = argv[4] if len(argv) > 4 else None
    key = api_key_of_file(argv[5]) if len(argv) > 5 else ""
    deadline = time.monotonic() + window
    while True:
        try:
            with urllib.request.urlopen(url, timeout=3) as r:
                status = r.status
        except Exception as exc:  # pylint: disable=broad-except
            state = subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True, check=False).stdout.strip()
            if state in ("failed", "inactive"):
                return "dead"
            if time.monotonic() >= deadline:
                return "starting: %s (%s)" % (exc, state)
            time.sleep(0.25)
            continue
        if status != 200:
            return "http-%d" % status
        problem = models_problem(models, key) if models else None
        return "unlisted: %s" % problem if problem else "ready"


if __name__ == "__main__":
    print(main(sys.argv))
