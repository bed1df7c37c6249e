# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a unit's HTTP API is ready, and what to say when a unit did not start or did not become ready.

Module pd_unit (start a unit, then wait for its API in the same module run) and the proxy's probe script
(roles/engine/files/probe_ready.py) poll with the same function. An engine answers /health once its model is
loaded, and must then list it in /v1/models; the start guard's refusal, or the engine's last words, are in the
unit's journal.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import http.client
import json
import socket
import time
from urllib.parse import urlsplit

READY = 'ready'
DEAD = 'dead'
# systemd states of a unit that will not answer any more
DEAD_STATES = ('failed', 'inactive')
# the start guard's words in the journal when it refuses a start (plugins/module_utils/guard/start_guard.py)
GUARD_REFUSED = 'vllm-pd start guard: refused'
POLL_S = 0.25
# how often the port is tried while one unit takes it over from another (a gap of a few hundred ms is typical)
GAP_POLL_S = 0.01


def http_get(url, headers=None, timeout=10):
    """(status, body) of a GET of an http:// url (any status; no redirect followed)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    try:
        conn.request('GET', (parts.path or '/') + ('?' + parts.query if parts.query else ''), headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read().decode('utf-8', 'replace')
    finally:
        conn.close()


def models_problem(url, key='', get=http_get):
    """None when url answers 200 with a non-empty data list, else what is wrong."""
    headers = {'Authorization': 'Bearer ' + key} if key else {}
    try:
        status, body = get(url, headers, 10)
    except (OSError, http.client.HTTPException) as exc:
        return 'GET %s failed: %s' % (url, exc)
    if status == 401:
        return "GET %s answered HTTP 401 (%s): the engine's VLLM_API_KEY and the key sent differ" % (
            url, 'a key was sent' if key else 'no key was sent, none in the environment file')
    if status != 200:
        return 'GET %s answered HTTP %d' % (url, status)
    try:
        data = json.loads(body).get('data')
    except (ValueError, AttributeError):
        data = None
    return None if isinstance(data, list) and data else 'GET %s listed no model: %s' % (url, body[:200])


def counts_problem(body, counts):
    """None when the JSON object BODY holds each key of COUNTS with its value, else what differs."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return 'not a JSON object: %s' % body[:200]
    wrong = ['%s %s, wanted %s' % (k, json.dumps(data.get(k)), v) for k, v in sorted(counts.items()) if data.get(k) != v]
    return '; '.join(wrong) or None


def poll_ready(url, window, unit_state, models=None, key='', get=http_get, clock=time.monotonic, sleep=time.sleep,
               counts=None):
    """Poll url every POLL_S for up to window seconds; stop at once when it answers or the unit is gone.

    unit_state() gives systemd's ActiveState. Answers: ready; dead (the unit is failed or inactive);
    unlisted: WHY (up, but models lists no model: final); http-CODE (url answered another success status);
    members: WHY (url answers, but its JSON lacks a value of COUNTS, {key: value}, within the window);
    starting: WHY (no answer, or an error status, within the window: poll again).
    """
    deadline = clock() + window
    while True:
        try:
            status, body = get(url, None, 3)
            why = 'HTTP %d' % status if status >= 400 else None
        except (OSError, http.client.HTTPException) as exc:
            status, body, why = None, '', str(exc)
        wrong = counts_problem(body, counts) if counts and status == 200 else None
        if wrong is not None:
            if clock() >= deadline:
                return 'members: %s' % wrong
            sleep(POLL_S)
            continue
        if why is not None:
            state = unit_state()
            if state in DEAD_STATES:
                return DEAD
            if clock() >= deadline:
                return 'starting: %s (%s)' % (why, state)
            sleep(POLL_S)
            continue
        if status != 200:
            return 'http-%d' % status
        problem = models_problem(models, key, get) if models else None
        return 'unlisted: %s' % problem if problem else READY


def final(answer):
    """Whether an answer of poll_ready ends the wait (ready, dead, unlisted); others are polled again."""
    return answer in (READY, DEAD) or answer.startswith('unlisted:')


def start_failure(unit, host, error, log_lines):
    """The lines that say why a unit did not start: the start guard's refusal when it refused, else its last lines."""
    refused = [line for line in log_lines if GUARD_REFUSED in line]
    head = '%s on %s did not start: %s' % (unit, host, error.strip())
    return [head] + (refused[-1:] if refused else ['Last log lines:'] + log_lines[-10:])


def not_ready(unit, host, answer, url, timeout, log_text):
    """What to say when a unit's API did not become ready (answer: the last of poll_ready)."""
    if answer == DEAD:
        what = 'exited'
    elif answer.startswith('unlisted:'):
        what = 'answers /health but lists no model'
    elif answer.startswith('members:'):
        what = 'answers but did not count the wanted members within %d s' % timeout
    else:
        what = 'did not become ready within %d s' % timeout
    return '%s on %s %s\n(GET %s: %s).\nLast log lines:\n%s' % (unit, host, what, url, answer, log_text)


def connect_once(address, port, timeout=0.5):
    """Open and close one TCP connection; raises OSError when refused or unreachable."""
    socket.create_connection((address, port), timeout=timeout).close()


def port_gap(connect, stopped, clock=time.monotonic, sleep=time.sleep, poll=GAP_POLL_S):
    """While one unit takes a port over from another: try connect() every poll s until stopped() or the port
    accepts again after a refusal. Returns the seconds from the first refused try to the first accepted one after
    it; 0.0 when the port never refused (stopped() came first); None when it refused and did not accept again."""
    refused_at = None
    while not stopped():
        try:
            connect()
        except OSError:
            if refused_at is None:
                refused_at = clock()
        else:
            if refused_at is not None:
                return clock() - refused_at
        sleep(poll)
    return None if refused_at is not None else 0.0


def replaced_unit(unit, run):
    """Whether unit (the one the started unit replaces) runs or is enabled: it is then stopped and disabled."""
    return any(run(['systemctl', verb, '--quiet', '--', unit])[0] == 0 for verb in ('is-active', 'is-enabled'))


def start(unit, restart, daemon_reload, run, check_mode=False, before_start=None):
    """Start (or restart) unit and enable it, with run(argv) -> (rc, out, err); returns (actions, error).

    actions: what was done, or in check mode what would be (daemon-reload, enable, start, restart); error: systemctl's
    words when a step failed, else None. systemd counts every start against StartLimitBurst within
    StartLimitIntervalSec, a deploy's starts too: after a few stop/fix/deploy cycles the next start would fail as
    start-limit-hit, so reset-failed clears the failed state and that counter first whenever this run starts it.
    before_start(): called just before the start or restart (a unit that holds the port stops then); its error,
    when not None, ends the start.
    """
    rc, out, err = run(['systemctl', 'show', '--property=ActiveState', '--value', '--', unit])
    if rc != 0:
        return [], 'systemctl show %s: %s' % (unit, (err or out).strip())
    active = out.strip() == 'active'
    rc, out, dummy = run(['systemctl', 'is-enabled', '--', unit])
    enabled = rc == 0 and out.strip() == 'enabled'
    actions = (['daemon-reload'] if daemon_reload else []) + ([] if enabled else ['enable'])
    actions += ['restart'] if restart else [] if active else ['start']
    if check_mode:
        return actions, None
    if daemon_reload:
        rc, out, err = run(['systemctl', 'daemon-reload'])
        if rc != 0:
            return [], 'systemctl daemon-reload: %s' % (err or out).strip()
    if restart or not active:
        # a unit systemd has not loaded (a new file) has nothing to reset
        rc, out, err = run(['systemctl', 'reset-failed', '--', unit])
        if rc != 0 and 'not loaded' not in err:
            return [], 'systemctl reset-failed %s: %s' % (unit, (err or out).strip())
    if not enabled:
        rc, out, err = run(['systemctl', 'enable', '--', unit])
        if rc != 0:
            return [], 'Unable to enable service %s: %s' % (unit, (err or out).strip())
    for verb in ('restart', 'start'):
        if verb in actions:
            error = before_start() if before_start else None
            if error:
                return actions[:-1], error
            rc, out, err = run(['systemctl', verb, '--', unit])
            if rc != 0:
                return actions[:-1], 'Unable to %s service %s: %s' % (verb, unit, (err or out).strip())
    return actions, None
