# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module pd_unit: a start and a wait in one run, what it says when either fails, and check mode."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.module_utils import basic

from ansible_collections.vllm_pd.ascend.plugins.modules import pd_unit as M


def fake_systemd(monkeypatch, state='active', fail=None, journal='one\ntwo\n'):
    calls = []

    def run_command(self, argv, **kwargs):
        calls.append(argv)
        if argv[0] == 'journalctl':
            return 0, journal, ''
        if fail and argv[1] == fail[0]:
            return 1, '', fail[1]
        if argv[1] == 'show':
            return 0, state, ''
        if argv[1] == 'is-enabled':
            return 0, 'enabled', ''
        return 0, '', ''

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    return calls


def test_start_then_ready_in_one_run(run_module, monkeypatch, http_server):
    base = http_server(lambda path, headers: (200, '{"data": [{"id": "m"}]}'))
    calls = fake_systemd(monkeypatch, state='inactive')
    failed, res = run_module(M, dict(name='u.service', host='pd-d1', ready=dict(url=base + '/health',
                                                                                models_url=base + '/v1/models')))
    assert not failed and res['changed'] and res['actions'] == ['start'] and res['answer'] == 'ready'
    assert [c[1] for c in calls] == ['show', 'is-enabled', 'reset-failed', 'start']


def test_check_mode_starts_and_waits_for_nothing(run_module, monkeypatch):
    calls = fake_systemd(monkeypatch, state='inactive')
    failed, res = run_module(M, dict(name='u.service', restart=True, ready=dict(url='http://127.0.0.1:9/health'),
                                     _ansible_check_mode=True))
    assert not failed and res['changed'] and res['actions'] == ['restart'] and 'answer' not in res
    assert [c[1] for c in calls] == ['show', 'is-enabled']


def test_a_refused_start_names_the_guard(run_module, monkeypatch):
    fake_systemd(monkeypatch, state='inactive', fail=('start', 'Job for u.service failed.'),
                 journal='starting\nvllm-pd start guard: refused to start u.service: API port 8200 is held\n')
    failed, res = run_module(M, dict(name='u.service', host='pd-d2'))
    assert failed
    assert res['msg'] == ('u.service on pd-d2 did not start: Unable to start service u.service: Job for u.service '
                          'failed.\nvllm-pd start guard: refused to start u.service: API port 8200 is held')


def test_a_unit_that_dies_while_loading_fails_with_its_last_words(run_module, monkeypatch):
    fake_systemd(monkeypatch, state='failed', journal='loading\nRuntimeError: out of memory\n')
    failed, res = run_module(M, dict(name='u.service', host='pd-p1', start=False,
                                     ready=dict(url='http://127.0.0.1:9/health', timeout=30)))
    assert failed and res['answer'] == 'dead'
    assert res['msg'].startswith('u.service on pd-p1 exited\n(GET http://127.0.0.1:9/health: dead).')
    assert res['msg'].endswith('Last log lines:\nloading\nRuntimeError: out of memory')
