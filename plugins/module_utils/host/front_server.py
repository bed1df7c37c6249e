# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One process of the proxy tier in HAProxy, through its runtime API on the admin socket (common/proxy_front.py):
drain it and wait until HAProxy counts no request on it (before its restart), or set it ready and wait until
HAProxy's health check has it UP (after its restart). HAProxy's own counts are the truth: the proxy's request_num
leaks, HAProxy's current sessions (scur) and queued requests (qcur) of the server do not.

The parsers and the decision are pure functions; talking to the socket is one function, passed in for tests.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import socket
import time

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front

STATES = ('drain', 'ready')
# srv_admin_state of `show servers state`: the drain forced by the runtime API (SRV_ADMF_FDRAIN of HAProxy's
# include/haproxy/server-t.h); the other drain bits (inherited, from the config) are not ours to clear
FORCED_DRAIN = 0x08
# the runtime API answers a command it did with an empty line; these mean the server is not in the running config
# (a process added by this run, before HAProxy reloads with it)
NOT_FOUND = ('No such server', 'No such backend')


class FrontDown(Exception):
    """The admin socket does not answer: HAProxy is not running (first deploy, or stopped)."""


def runtime_command(path, command, timeout=5.0):
    """Send one COMMAND to HAProxy's runtime API on the AF_UNIX socket PATH and return its answer (the socket
    closes after one command in non-interactive mode). FrontDown when nothing listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(path)
        except (IOError, OSError) as exc:
            if getattr(exc, 'errno', None) in (errno.ENOENT, errno.ECONNREFUSED):
                raise FrontDown('nothing listens on %s (%s)' % (path, errno.errorcode.get(exc.errno)))
            raise
        sock.sendall(command.encode('ascii') + b'\n')
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b''.join(chunks).decode('utf-8', 'replace')
    finally:
        sock.close()


def server_rows(text, backend):
    """The rows of BACKEND's servers in `show stat` (CSV, header '# pxname,svname,...') as dicts, in order (not its
    FRONTEND and BACKEND totals)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith('#'):
        return []
    head = lines[0].lstrip('# ').split(',')
    rows = [dict(zip(head, line.split(','))) for line in lines[1:] if line.strip()]
    return [r for r in rows if r.get('pxname') == backend and r.get('svname') not in ('FRONTEND', 'BACKEND')]


def parse_stat(text, backend, server):
    """The row of BACKEND/SERVER in `show stat` as a dict, or None."""
    return next((r for r in server_rows(text, backend) if r.get('svname') == server), None)


def read_tier(command, backend=proxy_front.BACKEND):
    """HAProxy's view of the tier, read-only: dict(front, error, processes). front: 'running', 'down' (nothing listens
    on the admin socket) or 'unreadable' (it did not answer); processes: per server of BACKEND its unit, HAProxy's
    status (UP, DOWN, DRAIN, MAINT, ...), requests in flight and queued, 5xx answers and its last health check."""
    try:
        text = command('show stat')
    except FrontDown as exc:
        return dict(front='down', error=str(exc), processes=[])
    except (IOError, OSError) as exc:
        return dict(front='unreadable', error='%s: %s' % (type(exc).__name__, exc), processes=[])
    processes = [dict(counts(r), server=r['svname'], unit=proxy_front.unit_of_server(r['svname']),
                      status=r.get('status', ''), errors_5xx=int(r.get('hrsp_5xx') or 0),
                      check=r.get('check_status', ''), last_check=r.get('last_chk', ''))
                 for r in server_rows(text, backend)]
    if not processes:
        return dict(front='unreadable', error='show stat lists no server of %s: %s' % (backend, text[:200]), processes=[])
    return dict(front='running', error=None, processes=processes)


def parse_admin_state(text, backend, server):
    """srv_admin_state (int) of BACKEND/SERVER in `show servers state BACKEND` (a version line, a '# be_id ...'
    header, one space-separated row per server), or None when it is not listed."""
    head = None
    for line in text.splitlines():
        if line.startswith('#'):
            head = line.lstrip('# ').split()
        elif head and line.strip():
            row = dict(zip(head, line.split()))
            if row.get('be_name') == backend and row.get('srv_name') == server:
                return int(row['srv_admin_state'])
    return None


def counts(row):
    """The requests HAProxy has on the server of ROW: in flight (scur) and queued for it (qcur)."""
    return dict(in_flight=int(row.get('scur') or 0), queued=int(row.get('qcur') or 0))


def is_up(row):
    """HAProxy's health check has the server UP (not 'UP 1/2', which is going down)."""
    return row.get('status') == 'UP'


def set_command(backend, server, state):
    return 'set server %s/%s state %s' % (backend, server, state)


def drain_timeout_message(unit, server, backend, seen, timeout):
    return ('%s (HAProxy server %s/%s) still has %d request(s) in flight and %d queued after %s s of drain: it was '
            'not restarted, it is ready in HAProxy again and still runs its old command. Fix: raise '
            'proxy_front_drain_timeout when generations run that long, or restart it at a moment of your choice '
            '(systemctl restart %s cuts what is then in flight on it)'
            % (unit, backend, server, seen['in_flight'], seen['queued'], timeout, unit))


def ready_timeout_message(unit, server, backend, status, timeout):
    return ('%s (HAProxy server %s/%s) is set ready but HAProxy\'s health check does not have it UP after %s s '
            '(status %s). Fix: read journalctl -u %s and the health route of its port on loopback, then run again'
            % (unit, backend, server, timeout, status, unit))


def run(state, server, backend=proxy_front.BACKEND, socket_path=proxy_front.ADMIN_SOCKET, unit='', timeout=900,
        interval=0.2, check_mode=False, command=None, clock=time.monotonic, sleep=time.sleep):
    """Drain or ready SERVER and wait. Returns dict(changed, front, before, after, seen, waited, status[, failed,
    msg]); seen: HAProxy's counts of the server ({in_flight, queued}) each time they changed while waiting. front:
    'running', 'down' (no HAProxy: nothing to do) or 'absent' (the server is not in HAProxy's running config:
    nothing to drain, it takes traffic once HAProxy reloads with it). COMMAND(text) -> answer talks to the socket
    (runtime_command by default)."""
    command = command or (lambda text: runtime_command(socket_path, text))
    unit = unit or server
    out = dict(changed=False, front='running', before=None, after=None, seen=[], waited=0.0, status='')
    try:
        admin = parse_admin_state(command('show servers state %s' % backend), backend, server)
    except FrontDown:
        out['front'] = 'down'
        return out
    if admin is None:
        out['front'] = 'absent'
        return out
    out['before'] = 'drain' if admin & FORCED_DRAIN else 'ready'
    out['after'] = state
    out['changed'] = out['before'] != state
    if check_mode:
        return out
    if out['changed']:
        answer = command(set_command(backend, server, state)).strip()
        if answer:
            out.update(failed=True, msg='HAProxy refused "%s": %s' % (set_command(backend, server, state), answer))
            return out
    start = clock()
    while True:
        row = parse_stat(command('show stat'), backend, server)
        if row is None:
            out.update(failed=True, msg='HAProxy no longer lists %s/%s in show stat (reloaded meanwhile?); run again'
                       % (backend, server))
            return out
        seen = counts(row)
        out['status'] = row.get('status', '')
        out['waited'] = round(clock() - start, 2)
        if not out['seen'] or out['seen'][-1] != seen:
            out['seen'].append(seen)
        if state == 'drain':
            if seen['in_flight'] == 0 and seen['queued'] == 0:
                return out
        elif is_up(row):
            return out
        if clock() - start >= timeout:
            if state == 'drain':
                # the tier keeps its capacity: the process serves on with its old command rather than stay drained
                command(set_command(backend, server, 'ready'))
                out.update(failed=True, msg=drain_timeout_message(unit, server, backend, seen, timeout))
            else:
                out.update(failed=True, msg=ready_timeout_message(unit, server, backend, out['status'], timeout))
            return out
        sleep(interval)
