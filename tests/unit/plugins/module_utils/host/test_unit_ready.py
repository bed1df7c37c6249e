# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils host/unit_ready: the systemctl steps of a start, the ready poll and what each failure says."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import unit_ready as U


class Systemd(object):
    """A fake systemctl: the unit's ActiveState and enablement, every argv run, and steps that fail."""

    def __init__(self, state='active', enabled='enabled', fail=()):
        self.state, self.enabled, self.fail, self.calls = state, enabled, dict(fail), []

    def __call__(self, argv):
        self.calls.append(argv[1])
        if argv[1] in self.fail:
            return 1, '', self.fail[argv[1]]
        if argv[1] == 'show':
            return 0, self.state + '\n', ''
        if argv[1] == 'is-enabled':
            return (0 if self.enabled == 'enabled' else 1), self.enabled + '\n', ''
        return 0, '', ''


def test_a_running_enabled_unit_with_nothing_changed_is_left_alone():
    run = Systemd()
    assert U.start('u.service', False, False, run) == ([], None)
    assert run.calls == ['show', 'is-enabled']


def test_a_stopped_unit_is_reset_then_started():
    run = Systemd(state='failed')
    assert U.start('u.service', False, False, run) == (['start'], None)
    assert run.calls == ['show', 'is-enabled', 'reset-failed', 'start']


def test_a_changed_unit_reloads_resets_and_restarts_and_a_new_one_is_enabled():
    run = Systemd(enabled='disabled', fail={'reset-failed': 'Unit u.service not loaded.'})
    assert U.start('u.service', True, True, run) == (['daemon-reload', 'enable', 'restart'], None)
    assert run.calls == ['show', 'is-enabled', 'daemon-reload', 'reset-failed', 'enable', 'restart']


def test_check_mode_only_reads():
    run = Systemd(state='inactive', enabled='disabled')
    assert U.start('u.service', False, True, run, check_mode=True) == (['daemon-reload', 'enable', 'start'], None)
    assert run.calls == ['show', 'is-enabled']


def test_a_failed_start_is_named_with_systemctl_words():
    run = Systemd(state='inactive', fail={'start': 'Job for u.service failed because the control process exited.'})
    actions, error = U.start('u.service', False, False, run)
    assert error == 'Unable to start service u.service: Job for u.service failed because the control process exited.'


@pytest.mark.parametrize('lines, tail', [
    (['x'] * 12 + ['vllm-pd start guard: refused to start u.service: port 8200 held by pid 7'],
     ['vllm-pd start guard: refused to start u.service: port 8200 held by pid 7']),
    (['line %d' % i for i in range(12)], ['Last log lines:'] + ['line %d' % i for i in range(2, 12)]),
])
def test_a_start_failure_says_the_guard_refusal_else_the_last_lines(lines, tail):
    out = U.start_failure('u.service', 'pd-d1', 'Unable to start service u.service: exited ', lines)
    assert out == ['u.service on pd-d1 did not start: Unable to start service u.service: exited'] + tail


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def test_the_poll_stops_at_once_when_the_unit_is_gone():
    clock = Clock()

    def refused(url, headers, timeout):
        raise OSError('connection refused')

    assert U.poll_ready('http://x/health', 600, lambda: 'failed', get=refused, clock=clock, sleep=clock.sleep) == U.DEAD
    assert clock.now == 0.0
    answer = U.poll_ready('http://x/health', 2, lambda: 'activating', get=refused, clock=clock, sleep=clock.sleep)
    assert answer.startswith('starting: connection refused (activating)') and clock.now == 2.0
    assert not U.final(answer) and U.final(U.READY) and U.final('unlisted: none')


def test_ready_needs_health_then_a_listed_model(http_server):
    answers = {'/health': (200, ''), '/v1/models': (200, '{"data": []}')}
    base = http_server(lambda path, headers: answers[path])
    assert U.poll_ready(base + '/health', 1, lambda: 'active').startswith('ready')
    answer = U.poll_ready(base + '/health', 1, lambda: 'active', base + '/v1/models')
    assert answer.startswith('unlisted: GET %s/v1/models listed no model' % base)
    answers['/v1/models'] = (200, '{"data": [{"id": "m"}]}')
    assert U.poll_ready(base + '/health', 1, lambda: 'active', base + '/v1/models') == U.READY
    # an error status (a proxy's 503 while it starts) is asked again until the window ends
    answers['/health'] = (503, '')
    assert U.poll_ready(base + '/health', 0.5, lambda: 'active').startswith('starting: HTTP 503 (active)')
    answers['/health'] = (204, '')
    assert U.poll_ready(base + '/health', 1, lambda: 'active') == 'http-204'


def test_a_health_route_is_ready_once_it_counts_the_wanted_members():
    clock = Clock()
    bodies = ['{"status": "ok", "prefill_instances": 0, "decode_instances": 0}',
              '{"status": "ok", "prefill_instances": 2, "decode_instances": 1}',
              '{"status": "ok", "prefill_instances": 2, "decode_instances": 2}']

    def get(url, headers, timeout):
        return 200, bodies[min(int(clock.now / U.POLL_S), len(bodies) - 1)]
    want = {'prefill_instances': 2, 'decode_instances': 2}
    assert U.poll_ready('http://x/healthcheck', 30, lambda: 'active', get=get, clock=clock, sleep=clock.sleep,
                        counts=want) == U.READY
    assert clock.now == 2 * U.POLL_S
    # never the wanted count: named at the end of the window, with what it counted
    clock = Clock()
    answer = U.poll_ready('http://x/healthcheck', 1, lambda: 'active', get=lambda *a: (200, bodies[1]), clock=clock,
                          sleep=clock.sleep, counts=want)
    assert answer == 'members: decode_instances 1, wanted 2' and not U.final(answer) and clock.now == 1.0
    assert U.counts_problem('<html>', want) == 'not a JSON object: <html>'
    assert U.counts_problem('{"status": "ok"}', want) == 'decode_instances null, wanted 2; prefill_instances null, wanted 2'


@pytest.mark.parametrize('answer, what', [
    (U.DEAD, 'exited'),
    ('members: decode_instances 1, wanted 2', 'answers but did not count the wanted members within 900 s'),
    ('unlisted: GET /v1/models listed no model', 'answers /health but lists no model'),
    ('starting: refused (activating)', 'did not become ready within 900 s'),
])
def test_not_ready_says_how(answer, what):
    text = U.not_ready('u.service', 'pd-p1', answer, 'http://a:8100/health', 900, 'last words')
    assert text.startswith('u.service on pd-p1 %s\n(GET http://a:8100/health: %s).' % (what, answer))
    assert text.endswith('Last log lines:\nlast words')


def test_the_unit_a_start_replaces_stops_just_before_the_start_and_its_error_ends_it():
    run, order = Systemd(state='inactive'), []
    assert U.start('front.service', False, False, run, before_start=lambda: order.append(list(run.calls))) == (
        ['start'], None)
    assert order == [['show', 'is-enabled', 'reset-failed']] and run.calls[-1] == 'start'
    run = Systemd(state='inactive')
    assert U.start('front.service', False, False, run, before_start=lambda: 'disable failed') == ([], 'disable failed')
    assert 'start' not in run.calls


class Port(object):
    """A port tried at a clock of 10 ms per try: TRIES[i] is what try i finds (True accepted, False refused)."""

    def __init__(self, tries):
        self.tries, self.n = list(tries), 0

    def connect(self):
        self.n += 1
        if not self.tries[self.n - 1]:
            raise ConnectionRefusedError(111, 'Connection refused')

    def clock(self):
        return self.n * 0.01


@pytest.mark.parametrize('tries, gap', [
    # the old holder accepts, the port refuses for 30 tries, the new holder accepts
    ([True] * 5 + [False] * 30 + [True], 0.30),
    # nothing held the port when the watch began
    ([False] * 3 + [True], 0.03),
])
def test_the_gap_runs_from_the_first_refused_try_to_the_first_accepted_one_after_it(tries, gap):
    port = Port(tries)
    assert U.port_gap(port.connect, lambda: False, clock=port.clock, sleep=lambda s: None) == pytest.approx(gap)
    assert port.n == len(tries)


def test_the_gap_is_none_when_the_port_never_accepts_again_and_zero_when_it_never_refused():
    port = Port([True, False, False, False])
    assert U.port_gap(port.connect, lambda: port.n >= 4, clock=port.clock, sleep=lambda s: None) is None
    port = Port([True] * 4)
    assert U.port_gap(port.connect, lambda: port.n >= 4, clock=port.clock, sleep=lambda s: None) == 0.0


def test_the_replaced_unit_counts_when_it_runs_or_is_enabled():
    def run_with(active, enabled):
        return lambda argv: ({'is-active': active, 'is-enabled': enabled}[argv[1]], '', '')
    assert U.replaced_unit('vllm-pd-proxy.service', run_with(0, 1))
    assert U.replaced_unit('vllm-pd-proxy.service', run_with(3, 0))
    assert not U.replaced_unit('vllm-pd-proxy.service', run_with(3, 1))
