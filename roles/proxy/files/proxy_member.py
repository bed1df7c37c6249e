import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

# On a host the role puts these module_utils in front of this script (filter pd_host_script).
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.prom_text import totals
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.secrets import api_key_of_file
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.smoke import body as greedy_body, headers, text_of

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
#
# What the proxy cannot say itself, named from outside (upstream-compat.md part 1 #3, #4):
# - a leaked count (0.23.0.post1: a client that disconnects while P computes cancels the handler before it
#   gives its count back, so /healthcheck request_num stays above 0 for good, an isolated member is never
#   dropped): request_num above 0 while every member's /metrics shows nothing running or waiting, at LEAK_READS
#   reads LEAK_GAP s apart, and no member finished a request between the first read and the last (served_counter).
#   Requests in transit between the proxy, P and D are on no member's gauges: on a loaded lab, steady traffic
#   matched the gauges at every read, but it moves the counter; a real leak with no traffic moves nothing.
#   leave and join answer "leaked" then (ProxyCountLeaked), before anything is removed.
# - a dead listener thread (a remove of a member still waiting to be admitted taints a key the proxy does not
#   serve; admitting it later raises KeyError in that thread): an added member that answers /v1/models (with
#   the proxy's own OPENAI_API_KEY) is never admitted. join answers "listener-dead" (ProxyListenerDead).
#   So join records the member it adds (MARKER "joining") and leave never removes a recorded member that is
#   not listed yet: it waits until the proxy admits it (then removes it) or has dropped it.
# - the release: a /healthcheck with request_num is the 0.23 proxy, whose add of a listed, isolated member
#   changes nothing; without it (0.18.0) that add probes the member and un-taints it, so listed after an
#   add is joined (the release table's proxy_healthcheck_keys and proxy_readd).
# proxy_member.py state URL MARKER ADMIN FALLBACK LIVE (the proxy role, once its files are written): {"admin": bool,
#   "active": ActiveState, "answer": the admin API's answer to an add of no instance, or null}, one visit for every
#   decision of a re-run (issue 36); ADMIN auto|yes|no, FALLBACK yes|no (auto and no proxy answers), LIVE yes|no
#   (settle, then read the members, when it has the admin API and runs).
# proxy_member.py answers HOST:PORT...: {"answers": [...]}, those that answer /v1/models as the proxy probes it.
# proxy_member.py health URL: {"state": "ok"|"leaked"|"busy"|"no-proxy", "request_num": N}.
# proxy_member.py restart URL TIMEOUT DESIRED_JSON (-e vllm_pd_proxy_recover=restart): once every member is
#   idle, restart the proxy unit (a new process: count 0, listener alive, its command line's members), then
#   add each member of DESIRED_JSON ({KIND: [HOST:PORT]}) it does not list and wait until it lists them:
#   {"state": "restarted"|"busy"|"not-admitted", "listed": {...}}.
# proxy_member.py routes URL: {"admin": true|false|null}: whether the running proxy serves /instances/add and
#   /instances/remove (its FastAPI /openapi.json; null: no proxy answers).

POLL = 1.0
TIMEOUT = 60
# the proxy's admin routes and /healthcheck share its one event loop with every request it serves: on a busy
# host they can take seconds to answer
ADMIN_TIMEOUT = 30
LEAK_GAP = 1.5
LEAK_READS = 5
# what it sends to and reads from the proxy and the engines: the release table's facts of the newest supported
# release (its routes, count key, options and gauges are the same in every release with the admin API)
UP = runtime(None)
# the running and waiting gauges of an engine, and its counter of finished requests
GAUGES = UP["busy_gauges"]
SERVED = UP["served_counter"]
# the proxy-global count of requests in flight, a key of its /healthcheck where the release has it (0.23)
COUNT = UP["proxy_count_key"]
ADMIN = {"add": UP["proxy_add_route"], "remove": UP["proxy_remove_route"]}
OTHER = {"prefill": "decode", "decode": "prefill"}
UNIT = "vllm-pd-proxy.service"


def admin_body(kind, members):
    """The JSON body of an admin API request: members (host:port) of KIND (prefill or decode)."""
    keys = UP["proxy_admin_request"]
    return {keys["kind"]: kind, keys["members"]: members}


def proxy_pid():
    out = subprocess.run(["systemctl", "show", "--property=MainPID", "--value", "--", UNIT],
                         capture_output=True, text=True, check=False).stdout.strip()
    return out if out.isdigit() and out != "0" else None


def _load(path, pid):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if data.get("pid") == pid else {}


def read_marker(path, pid):
    return _load(path, pid).get("isolated", {})


def read_joining(path, pid):
    """{KIND: {HOST:PORT: unix time of its add}}: members this proxy process was asked to add, not listed yet."""
    return _load(path, pid).get("joining", {})


def write_marker(path, pid, isolated, joining=None):
    isolated = dict((k, v) for k, v in isolated.items() if v)
    joining = dict((k, v) for k, v in (read_joining(path, pid) if joining is None else joining).items() if v)
    if not isolated and not joining:
        if os.path.exists(path):
            os.unlink(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        data = {"pid": pid, "isolated": isolated}
        if joining:
            data["joining"] = joining
        json.dump(data, f)
    os.replace(tmp, path)


def set_joining(path, pid, kind, member, when):
    """Record (WHEN a time) or forget (WHEN None) that MEMBER was added and may wait in the proxy."""
    joining = read_joining(path, pid)
    if when is None:
        joining.get(kind, {}).pop(member, None)
    else:
        joining.setdefault(kind, {})[member] = when
    write_marker(path, pid, read_marker(path, pid), joining)


def get_json(url, timeout=ADMIN_TIMEOUT):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


def healthcheck(url):
    return get_json(url + UP["proxy_health_route"])


def admin_answer(url):
    """The proxy's answer to an add of no instance (which changes nothing): its member lists, as its admin API names them."""
    body = json.dumps(admin_body("prefill", [])).encode()
    req = urllib.request.Request(url + ADMIN["add"], data=body, headers={"Content-Type": "application/json"},
                                 method="POST")
    with urllib.request.urlopen(req, timeout=ADMIN_TIMEOUT) as r:
        return json.load(r)


def lists(url):
    """{"prefill": [...], "decode": [...]} as the proxy lists them."""
    answer = admin_answer(url)
    return {k: answer.get(UP["proxy_admin_answer"][k], []) for k in OTHER}


def gauges(text):
    """Sum of the running and waiting gauges in a Prometheus text exposition (ValueError: a garbled gauge)."""
    return sum(totals(text, GAUGES).values())


def member_work(listed):
    """(the members whose /metrics show a request running or waiting, or cannot be read (unknown: not idle),
    the requests the readable members have finished in all)."""
    busy, served = [], 0.0
    for member in listed["prefill"] + listed["decode"]:
        try:
            with urllib.request.urlopen("http://%s%s" % (member, UP["engine_routes"]["metrics"]), timeout=10) as r:
                text = r.read().decode("utf-8", "replace")
            if gauges(text):
                busy.append(member)
            served += totals(text, (SERVED,))[SERVED]
        except (OSError, ValueError) as exc:
            busy.append("%s (%s)" % (member, exc))
    return busy, served


def busy_members(listed):
    return member_work(listed)[0]


def health(url, gap=LEAK_GAP, sleep=time.sleep):
    """'leaked' when the proxy counts requests in flight while no member has one and no member finishes one, at
    LEAK_READS reads GAP s apart; 'busy' when a member has work at one of them or finished a request between them
    (the count may be real); 'ok' when it counts none."""
    first_served = None
    for read in range(LEAK_READS):
        if read:
            sleep(gap)
        count = healthcheck(url).get(COUNT)
        if not count:
            return "ok", count or 0
        busy, served = member_work(lists(url))
        first_served = served if first_served is None else first_served
        if busy or served != first_served:
            return "busy", count
    return "leaked", count


def readd_untaints(url):
    """Whether an add of a listed, isolated member un-taints it (the 0.18.0 proxy, whose /healthcheck has no
    request_num), not a no-op (0.23)."""
    return COUNT not in healthcheck(url)


def routes(url):
    try:
        paths = get_json(url + "/openapi.json").get("paths", {})
    except (OSError, ValueError):
        return None
    return ADMIN["add"] in paths and ADMIN["remove"] in paths


def active_state():
    return subprocess.run(["systemctl", "show", "--property=ActiveState", "--value", "--", UNIT],
                          capture_output=True, text=True, check=False).stdout.strip()


def settle_all(url, marker):
    """Wait for every member this proxy process was recorded as asked to add (join) to be listed or dropped."""
    pid = proxy_pid()
    for kind, members in (read_joining(marker, pid) if pid else {}).items():
        for member in list(members):
            settle(url, kind, member, marker, pid)


def proxy_state(url, marker, admin, fallback, live):
    """What a re-run of the proxy role decides from, in one visit: whether the proxy has the admin API (ADMIN
    auto: its routes, FALLBACK when no proxy answers; yes, no), its unit's ActiveState and, when LIVE (its settings
    unchanged) on a running proxy with the admin API, its answer to an add of no instance once the members a rolling
    change added are admitted or dropped (a remove of a member still waiting kills the 0.23 proxy's listener)."""
    has_admin = routes(url) if admin == "auto" else admin == "yes"
    out = {"admin": fallback == "yes" if has_admin is None else has_admin, "active": active_state(), "answer": None}
    if live and out["admin"] and out["active"] == "active":
        settle_all(url, marker)
        out["answer"] = admin_answer(url)
    return out


def proxy_key(pid):
    """The OPENAI_API_KEY the proxy process sends to its members (None: unset)."""
    try:
        with open("/proc/%s/environ" % pid, "rb") as f:
            env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
    except OSError:
        return None
    key = env.get(UP["proxy_api_key_env"].encode())
    return key.decode() if key is not None else None


def answers_models(member, pid):
    """Whether MEMBER answers GET /v1/models as the proxy's own probe asks it (5 s, its bearer token)."""
    req = urllib.request.Request("http://%s%s" % (member, UP["engine_routes"]["models"]),
                                 headers={"Authorization": "Bearer %s" % proxy_key(pid)})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return 200 <= r.status < 300
    except (OSError, ValueError):
        return False


def drop_deadline(pid):
    """Seconds after an add by which the proxy admitted or dropped the member: its listener probes every
    --waiting-retry-interval s (default 10) and drops after --max-waiting-retries failures (default 3)."""
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0")]
    except OSError:
        argv = []

    def flag(name, default):
        return float(argv[argv.index(name) + 1]) if name in argv[:-1] else default
    # each probe may take its 5 s timeout; one pass of slack
    wait = UP["proxy_wait_flags"]
    return (flag(wait["retries"], 3) + 1) * (flag(wait["interval"], 10) + 5)


def call(url, mode, kind, member):
    """/instances/MODE of MEMBER (None: of nothing, which only reads the lists) -> the members of KIND listed after it."""
    body = json.dumps(admin_body(kind, [member] if member else [])).encode()
    req = urllib.request.Request(url + ADMIN[mode], data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=ADMIN_TIMEOUT) as r:
        answer = json.load(r)
    if UP["proxy_admin_error"] in answer:
        raise RuntimeError(answer[UP["proxy_admin_error"]])
    return answer.get(UP["proxy_admin_answer"][kind], [])


def settle(url, kind, member, marker, pid, clock=time.time, sleep=time.sleep):
    """Wait until a member this proxy was asked to add is listed or dropped: a remove of a member still
    waiting to be admitted kills the proxy's listener thread (0.23). -> whether it is listed."""
    added = read_joining(marker, pid).get(kind, {}).get(member)
    while True:
        listed = call(url, "add", kind, None)
        if member in listed or added is None or clock() >= added + drop_deadline(pid):
            set_joining(marker, pid, kind, member, None)
            return member in listed
        sleep(POLL)


def leave(url, kind, member, marker, pid, sleep=time.sleep):
    if health(url, sleep=sleep)[0] == "leaked":
        return "leaked", call(url, "add", kind, None)
    settle(url, kind, member, marker, pid)
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


def join_step(listed, member, isolated, untaints=False):
    """What one add told: 'joined' (listed, not isolated; or listed after an add that un-taints),
    'dropped' (not listed: the proxy dropped the isolation, the add queued it), or 'isolated' (listed but
    still isolated)."""
    if member not in listed:
        return "dropped"
    return "isolated" if member in isolated and not untaints else "joined"


def join(url, kind, member, marker, pid, timeout, clock=time.monotonic, sleep=time.sleep):
    deadline = clock() + timeout
    first = True
    untaints = readd_untaints(url)
    leak_checked = False
    while True:
        isolated = read_marker(marker, pid)
        set_joining(marker, pid, kind, member, time.time())
        listed = call(url, "add", kind, member)
        step = join_step(listed, member, isolated.get(kind, []), untaints)
        if step == "joined":
            set_joining(marker, pid, kind, member, None)
            if member in isolated.get(kind, []):
                isolated[kind].remove(member)
                write_marker(marker, pid, isolated)
            return ("member" if first else "joined"), listed
        first = False
        if step == "dropped" and member in isolated.get(kind, []):
            isolated[kind].remove(member)
            write_marker(marker, pid, isolated)
        # still isolated: a count that never reaches 0 with every member idle is leaked, waiting is useless
        if step == "isolated" and not leak_checked and clock() >= deadline - timeout / 2:
            leak_checked = True
            if health(url, sleep=sleep)[0] == "leaked":
                return "leaked", listed
        if clock() >= deadline:
            if step == "isolated":
                return "isolated", listed
            return ("listener-dead" if answers_models(member, pid) else "waiting"), listed
        sleep(POLL)


def post(url, body, key=""):
    req = urllib.request.Request(url + UP["proxy_completions_route"], data=json.dumps(body).encode(), headers=headers(key),
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode("utf-8", "replace")[:300]}
    except (OSError, ValueError) as e:
        return None, {"error": str(e)}


def check_pair(prefill, decode, body, reference, key=""):
    status, first = post(prefill, dict(body, **UP["proxy_prefill_request"]), key)
    params = first.get(UP["completion_answer"]["kv_transfer_params"])
    if status != 200 or not params:
        return False, "P answered HTTP %s without kv_transfer_params: %s" % (status, first.get("error", first))
    status, answer = post(decode, dict(body, **{UP["completion_request"]["kv_transfer_params"]: params}), key)
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


def restart(url, timeout, desired, clock=time.monotonic, sleep=time.sleep):
    """-e vllm_pd_proxy_recover=restart: restart the proxy once no member has a request, then have it list
    every member of DESIRED."""
    deadline = clock() + timeout
    while busy_members(lists(url)):
        if clock() >= deadline:
            return "busy", lists(url)
        sleep(0.2)
    # the unit on disk names the inventory's members: load it before the restart
    subprocess.run(["systemctl", "daemon-reload"], check=True)
    subprocess.run(["systemctl", "restart", "--", UNIT], check=True)
    while True:
        try:
            listed = lists(url)
            break
        except (OSError, ValueError):
            if clock() >= deadline + 60:
                raise
            sleep(0.2)
    for kind, members in desired.items():
        missing = [m for m in members if m not in listed[kind]]
        if missing:
            body = json.dumps(admin_body(kind, missing)).encode()
            req = urllib.request.Request(url + ADMIN["add"], data=body,
                                         headers={"Content-Type": "application/json"}, method="POST")
            urllib.request.urlopen(req, timeout=ADMIN_TIMEOUT).close()
    wait_until = clock() + drop_deadline(proxy_pid())
    while any(m not in listed[k] for k, ms in desired.items() for m in ms):
        if clock() >= wait_until:
            return "not-admitted", listed
        sleep(POLL)
        listed = lists(url)
    return "restarted", listed


def main(argv):
    if argv[0] == "isolated":
        pid = proxy_pid()
        print(json.dumps({"isolated": read_marker(argv[1], pid) if pid else {}}))
        return
    if argv[0] == "answers":
        pid = proxy_pid()
        print(json.dumps({"answers": [m for m in argv[1:] if pid and answers_models(m, pid)]}))
        return
    if argv[0] == "state":
        print(json.dumps(proxy_state(argv[1], argv[2], argv[3], argv[4], argv[5] == "yes")))
        return
    if argv[0] in ("health", "routes", "restart"):
        url = argv[1]
        if argv[0] == "routes":
            print(json.dumps({"admin": routes(url)}))
        elif proxy_pid() is None:
            print(json.dumps({"state": "no-proxy"}))
        elif argv[0] == "health":
            state, count = health(url)
            print(json.dumps({"state": state, COUNT: count}))
        else:
            state, listed = restart(url, float(argv[2]), json.loads(argv[3]))
            print(json.dumps({"state": state, "listed": listed}))
        return
    mode, url, kind, member, marker = argv[:5]
    pid = proxy_pid()
    out = {"state": "no-proxy", "listed": []}
    if pid is not None and mode == "leave":
        out["state"], out["listed"] = leave(url, kind, member, marker, pid)
    elif pid is not None and mode == "prove":
        body = greedy_body(argv[5], argv[6], int(argv[7]))
        serving = member in call(url, "add", kind, None) and member not in read_marker(marker, pid).get(kind, [])
        if argv[8] == "yes" or not serving:
            out["pairs"] = prove(url, kind, member, marker, pid, body, api_key_of_file(argv[9]) if len(argv) > 9 else "")
            out["state"] = "proven" if all(p["ok"] for p in out["pairs"]) else "failed"
        else:
            out["state"] = "serving"
    elif pid is not None:
        out["state"], out["listed"] = join(url, kind, member, marker, pid, float(argv[5]))
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
