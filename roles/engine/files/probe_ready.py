import subprocess
import sys

# On a host the role puts these module_utils in front of this script (filter pd_host_script).
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.secrets import api_key_of_file
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.unit_ready import poll_ready

# probe_ready.py UNIT URL WINDOW [MODELS_URL [ENV_FILE]]: poll URL for up to WINDOW seconds within this one call (one
# SSH round trip) and stop at once when it answers or UNIT is no longer running; MODELS_URL (/v1/models) must then
# list a model. Prints one line, the answer of module_utils host/unit_ready.poll_ready: ready, dead, unlisted: WHY,
# http-CODE or starting: WHY. The proxy's waits run it; an engine's wait is module pd_unit, the same poll.
# With VLLM_API_KEY in ENV_FILE (the engine's 0600 environment file) vLLM answers 401 under /v1 without
# "Authorization: Bearer KEY" (/health is open): the key is read here, never passed on a command line.


def unit_state(unit):
    return subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True, check=False).stdout.strip()


def main(argv):
    unit, url, window = argv[1], argv[2], float(argv[3])
    models = argv[4] if len(argv) > 4 else None
    key = api_key_of_file(argv[5]) if len(argv) > 5 else ""
    return poll_ready(url, window, lambda: unit_state(unit), models, key)


if __name__ == "__main__":
    print(main(sys.argv))
