import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

# proxy_member.py leave|prove|join URL KIND HOST:PORT MARKER [...]: one member of a proxy with the admin API
# (vllm-ascend's example proxy) out for a rolling restart, proven with its peers, and back
# (roles/proxy/tasks/leave.yml, join.yml).
#
# With a request in flight anywhere in the proxy, /instances/remove only isolates the member: it stays
# listed with priority 1e15 until a pass of the proxy's listener (every --waiting-retry-interval s)
# finds the proxy-global request count at 0; and /instances/add of a listed member does nothing. So an
# isolated member cannot simply be added back: join waits (bounded) until the proxy really dropped it,
# then adds it and waits until the proxy's own /v1/models probe admits it. Which members are isolated
# lives in MARKER on the proxy host, tied to the proxy's pid (a restarted proxy starts from its command
# line, with no isolation), so a run that stopped half-way still knows them.
#
# prove ... MODEL PROMPT MAX_TOKENS RESTARTED [ENV_FILE]: when this run (re)started the instance (RESTARTED=yes) or the
# proxy does not serve with it (not listed, or isolated), one greedy request per pair of the instance with
# each peer of the other role the proxy serves with (its list less the isolated ones), sent the way the proxy sends it (P
# with do_remote_decode and max_tokens 1, then D with P's kv_transfer_params). A restarted P has new
# Mooncake metadata (engine id, TE port, buffer addresses) that every D must fetch again; a restarted D
# must pull from every P. HTTP 200 is no proof (after a failed transfer D answers 200 with empty or
# repeated text, field-failures.md 1), so D's text must equal the text P computes alone. With an API key
# (OPENAI_API_KEY in ENV_FILE, the proxy's 0600 environment file) each request carries it, as the proxy's own.
#
# Prints one JSON line: {"state": ..., "listed": [...]} (prove: and "pairs": [{prefill, decode, ok, detail}]);
# leave: removed | isolated | no-proxy; prove: proven | failed | serving (nothing to prove) | no-proxy;
# join: member (it was) | joined | isolated (still isolated at the deadline) | waiting (never admitted) | no-proxy.
# proxy_member.py isolated MARKER (the doctor): {"isolated": {KIND: [HOST:PORT]}} the running proxy still isolates.

POLL = 1.0
TIMEOUT = 60
OTHER = {"prefill": "decode", "decode": "prefill"}
UNIT = "vllm-pd-proxy.service"


def proxy_pid():
    out = subprocess.run(["systemctl", "show", "--property=MainPID", "--value", "--", UNIT],
                         capture_output=True, text=True, check=False).stdout.strip()
    return out if out.isdigit() and out != "0" else None


def api_key(path):
    """VLLM_API_KEY (else OPENAI_API_KEY) of the EnvironmentFile PATH, as systemd reads it (bare, or
    double-quoted with backslash escapes); '' without one (module_utils/common/secrets.py does the same)."""
    values = {}
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return ""
    for line in text.splitlines():
        name, sep, value = line.strip().partition("=")
        if sep and name and not name.startswith("#"):
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            values[name.strip()] = value
    return values.get("VLLM_API_KEY") or values.get("OPENAI_API_KEY") or ""


def read_marker(path, pid):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data.get("isolated", {}) if data.get("pid") == pid else {}


def write_marker(path, pid, isolated):
    isolated = dict((k, v) for k, v in isolated.items() if v)
    if not isolated:
        if os.path.exists(path):
            os.unlink(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": pid, "isolated": isolated}, f)
    os.replace(tmp, path)


def call(url, mode, kind, member):
    """/instances/MODE of MEMBER (None: of nothing, which only reads the lists) -> the members of KIND listed after it."""
    body = json.dumps({"type": kind, "instances": [member] if member else []}).encode()
    req = urllib.request.Request("%s/instances/%s" % (url, mode), data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        answer = json.load(r)
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer.get("current_%s_instances" % kind, [])


def leave(url, kind, member, marker, pid):
    isolated = read_marker(marker, pid)
    listed = call(url, "remove", kind, member)
    if member not in listed:
        # gone at once (nothing in flight), or it was never a member
        state = "removed"
    else:
        isolated.setdefault(kind, [])
        if member not in isolated[kind]:
            isolated[kind].append(member)
        state = "isolated"
    write_marker(marker, pid, isolated)
    return state, listed


def join_step(listed, member, isolated):
    """What one add told: 'joined' (listed, not isolated), 'dropped' (not listed: the proxy dropped the
    isolation, the add queued it), or 'isolated' (listed but still isolated)."""
    if member not in listed:
        return "dropped"
    return "isolated" if member in isolated else "joined"


def join(url, kind, member, marker, pid, timeout, clock=time.monotonic, sleep=time.sleep):
    deadline = clock() + timeout
    first = True
    while True:
        isolated = read_marker(marker, pid)
        listed = call(url, "add", kind, member)
        step = join_step(listed, member, isolated.get(kind, []))
        if step == "joined":
            return ("member" if first else "joined"), listed
        first = False
        if step == "dropped" and member in isolated.get(kind, []):
            isolated[kind].remove(member)
            write_marker(marker, pid, isolated)
        if clock() >= deadline:
            return ("isolated" if step == "isolated" else "waiting"), listed
        sleep(POLL)


def post(url, body, key=""):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode("utf-8", "replace")[:300]}
    except (OSError, ValueError) as e:
        return None, {"error": str(e)}


def text_of(answer):
    return ((answer.get("choices") or [{}])[0]).get("text") or ""


def check_pair(prefill, decode, body, reference, key=""):
    status, first = post(prefill, dict(body, max_tokens=1, min_tokens=1, kv_transfer_params={
        "do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
        "remote_block_ids": None, "remote_host": None, "remote_port": None}), key)
    if status != 200 or not first.get("kv_transfer_params"):
        return False, "P answered HTTP %s without kv_transfer_params: %s" % (status, first.get("error", first))
    status, answer = post(decode, dict(body, kv_transfer_params=first["kv_transfer_params"]), key)
    if status != 200:
        return False, "D answered HTTP %s: %s" % (status, answer.get("error", answer))
    text = text_of(answer)
    if not text or text != reference:
        return False, "D's text %r differs from P's own %r (the KV did not arrive intact)" % (text[:80], reference[:80])
    return True, "%d characters, equal to P's own" % len(text)


def prove(url, kind, member, marker, pid, body, key=""):
    """Every pair of MEMBER with the serving peers of the other role."""
    isolated = read_marker(marker, pid)
    other = OTHER[kind]
    peers = [p for p in call(url, "add", other, None) if p not in isolated.get(other, [])]
    prefills, decodes = ([member], peers) if kind == "prefill" else (peers, [member])
    out = []
    for p in prefills:
        status, alone = post("http://" + p, body, key)
        reference = text_of(alone) if status == 200 else None
        for d in decodes:
            if reference is None:
                ok, detail = False, "P alone answered HTTP %s: %s" % (status, alone.get("error", alone))
            else:
                ok, detail = check_pair("http://" + p, "http://" + d, body, reference, key)
            out.append({"prefill": p, "decode": d, "ok": ok, "detail": detail})
    return out


def main(argv):
    if argv[0] == "isolated":
        pid = proxy_pid()
        print(json.dumps({"isolated": read_marker(argv[1], pid) if pid else {}}))
        return
    mode, url, kind, member, marker = argv[:5]
    pid = proxy_pid()
    out = {"state": "no-proxy", "listed": []}
    if pid is not None and mode == "leave":
        out["state"], out["listed"] = leave(url, kind, member, marker, pid)
    elif pid is not None and mode == "prove":
        body = {"model": argv[5], "prompt": argv[6], "max_tokens": int(argv[7]), "temperature": 0, "stream": False}
        serving = member in call(url, "add", kind, None) and member not in read_marker(marker, pid).get(kind, [])
        if argv[8] == "yes" or not serving:
            out["pairs"] = prove(url, kind, member, marker, pid, body, api_key(argv[9]) if len(argv) > 9 else "")
            out["state"] = "proven" if all(p["ok"] for p in out["pairs"]) else "failed"
        else:
            out["state"] = "serving"
    elif pid is not None:
        out["state"], out["listed"] = join(url, kind, member, marker, pid, float(argv[5]))
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
