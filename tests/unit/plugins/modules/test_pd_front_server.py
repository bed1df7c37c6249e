# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pd_front_server: the module around front_server.run: its defaults are proxy_front's names, check mode sets
nothing, diff shows the server's state, a timeout fails with the message that names the fix."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import front_server as F
from ansible_collections.vllm_pd.ascend.plugins.modules import pd_front_server as M

SERVER = proxy_front.processes_plan(18001, 1)[0]['server']


class FakeHaproxy:
    """The runtime API with one server that finishes a request per `show stat` (unless not FINISHING)."""

    def __init__(self, in_flight):
        self.admin, self.in_flight, self.finishing, self.sent = {SERVER: 0}, in_flight, True, []

    def __call__(self, text):
        self.sent.append(text)
        if text.startswith('show servers state'):
            return '1\n# be_id be_name srv_id srv_name srv_op_state srv_admin_state\n1 %s 1 %s 2 %d\n' % (
                proxy_front.BACKEND, SERVER, self.admin[SERVER])
        if text == 'show stat':
            row = '%s,%s,0,%d,UP' % (proxy_front.BACKEND, SERVER, self.in_flight)
            self.in_flight = max(0, self.in_flight - self.finishing)
            return '# pxname,svname,qcur,scur,status\n' + row + '\n'
        self.admin[SERVER] = F.FORCED_DRAIN if text.endswith('drain') else 0
        return '\n'


@pytest.fixture
def haproxy(monkeypatch):
    fake = FakeHaproxy(in_flight=2)
    sockets = []

    def command(path, text):
        sockets.append(path)
        return fake(text)
    monkeypatch.setattr(F, 'runtime_command', command)
    fake.sockets = sockets
    return fake


def test_defaults_are_the_front_s_own_names():
    spec = M.argument_spec()
    assert spec['backend']['default'] == proxy_front.BACKEND and spec['socket']['default'] == proxy_front.ADMIN_SOCKET


def test_drain_waits_for_zero_and_shows_the_state_change_as_diff(run_module, haproxy):
    failed, res = run_module(M, dict(state='drain', server=SERVER, _ansible_diff=True))
    assert not failed and res['changed'] and res['front'] == 'running', res
    assert res['seen'][0]['in_flight'] == 2 and res['seen'][-1] == dict(in_flight=0, queued=0)
    assert res['diff'] == dict(before='%s/%s: ready\n' % (proxy_front.BACKEND, SERVER),
                               after='%s/%s: drain\n' % (proxy_front.BACKEND, SERVER))
    assert set(haproxy.sockets) == {proxy_front.ADMIN_SOCKET}


def test_check_mode_sets_nothing(run_module, haproxy):
    failed, res = run_module(M, dict(state='drain', server=SERVER, _ansible_check_mode=True))
    assert not failed and res['changed'] and haproxy.admin[SERVER] == 0
    assert not [t for t in haproxy.sent if t.startswith('set ')]


def test_a_drain_that_does_not_reach_zero_fails_naming_the_unit(run_module, haproxy, monkeypatch):
    haproxy.finishing = False
    failed, res = run_module(M, dict(state='drain', server=SERVER, unit='vllm-pd-proxy@1.service', timeout=1))
    assert failed and 'vllm-pd-proxy@1.service' in res['msg'] and 'proxy_front_drain_timeout' in res['msg'], res


def test_a_timeout_under_one_second_is_refused(run_module, haproxy):
    failed, res = run_module(M, dict(state='ready', server=SERVER, timeout=0))
    assert failed and 'timeout' in res['msg'] and haproxy.sent == []
