# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Allowed holders stay off: the plan (what to disable, sockets, restart policy), the record, the restore."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import holders as H
from ansible_collections.vllm_pd.ascend.plugins.modules import kv_port_group as M

HOST = '127.0.0.2'


class FakeOps(object):
    """systemctl/podman as a table; every action is recorded in calls, in order."""

    def __init__(self, units=None, policies=None, sockets_text='', update_rc=0):
        self.units = units or {}
        self.policies = policies or {}
        self.sockets_text = sockets_text
        self.update_rc = update_rc
        self.calls = []

    def unit_state(self, unit):
        if unit not in self.units:
            return dict(error='Unit %s not loaded' % unit)
        return dict(self.units[unit], Id=unit)

    def stop_unit(self, unit):
        self.calls.append(('stop', unit))
        return 0, ''

    def disable_unit(self, unit, extra=()):
        self.calls.append(('disable', unit) + tuple(extra))
        return 0, ''

    def list_sockets(self):
        return self.sockets_text

    def container_restart_policy(self, engine, name):
        return self.policies.get(name)

    def set_container_restart(self, engine, name, policy):
        self.calls.append(('update', engine, name, policy))
        return self.update_rc, 'unknown flag: --restart' if self.update_rc else ''


class FakeModule(object):
    def __init__(self):
        self.warnings = []

    def warn(self, text):
        self.warnings.append(text)

    def fail_json(self, msg, **kw):
        raise AssertionError(msg)


def svc(enabled, active='active', **kw):
    d = dict(UnitFileState=enabled, ActiveState=active, LoadState='loaded')
    d.update(kw)
    return d


def test_plan_off_enabled_service_with_its_socket():
    ops = FakeOps(units={'grafana-server.service': svc('enabled', TriggeredBy='grafana.socket'),
                         'grafana.socket': svc('enabled')})
    rec = H.plan_off('grafana-server.service', None, ops)
    assert rec['kind'] == 'unit' and rec['enabled'] == 'enabled' and rec['active'] is True and rec['disable']
    assert rec['sockets'] == [dict(name='grafana.socket', enabled='enabled', active=True, disable=True)]
    assert ops.calls == []  # planning reads only


@pytest.mark.parametrize('state, disable', [('enabled', True), ('enabled-runtime', True), ('disabled', False),
                                            ('static', False), ('indirect', False), ('masked', False)])
def test_only_enabled_units_are_disabled(state, disable):
    rec = H.plan_off('x.service', None, FakeOps(units={'x.service': svc(state)}))
    assert rec['disable'] is disable


def test_keep_off_order_socket_first_then_unit_and_disable_only_what_was_enabled():
    ops = FakeOps(units={'g.service': svc('enabled', TriggeredBy='g.socket'), 'g.socket': svc('enabled')})
    rec = H.plan_off('g.service', None, ops)
    mod = FakeModule()
    for sock in rec['sockets']:
        H.keep_off_socket(mod, ops, sock, 'g.service', {})
    ops.stop_unit('g.service')  # what port_stop does between the two
    H.keep_off(mod, ops, rec, {})
    assert ops.calls == [('stop', 'g.socket'), ('disable', 'g.socket'), ('stop', 'g.service'),
                         ('disable', 'g.service')]


def test_static_unit_is_not_disabled_and_warns():
    ops = FakeOps(units={'s.service': svc('static')})
    rec = H.plan_off('s.service', None, ops)
    mod = FakeModule()
    H.keep_off(mod, ops, rec, {})
    assert ops.calls == [] and 'static' in mod.warnings[0]


def test_runtime_enabled_is_disabled_with_runtime():
    ops = FakeOps(units={'r.service': svc('enabled-runtime')})
    H.keep_off(FakeModule(), ops, H.plan_off('r.service', None, ops), {})
    assert ops.calls == [('disable', 'r.service', '--runtime')]


def test_socket_holder_stops_and_disables_the_services_it_starts():
    ops = FakeOps(units={'foo.socket': svc('enabled', Triggers='foo.service'), 'foo.service': svc('disabled')})
    rec = H.plan_off('foo.socket', None, ops)
    assert rec['services'] == [dict(name='foo.service', enabled='disabled', active=True, disable=False)]
    H.keep_off(FakeModule(), ops, rec, {})
    assert ops.calls == [('disable', 'foo.socket'), ('stop', 'foo.service')]


def test_systemd_owned_listener_is_attached_to_its_socket_unit():
    text = ('/run/dbus/system_bus_socket dbus.socket dbus.service\n'
            '[::]:28009 foo.socket foo.service\n')
    busy = [dict(port=28009, pid=1, unit='init.scope'), dict(port=28010, pid=77, unit='x.service')]
    H.attach_socket_units(busy, lambda: text)
    assert busy[0]['unit'] == 'foo.socket' and busy[0]['activates'] == ['foo.service']
    assert busy[1]['unit'] == 'x.service' and 'activates' not in busy[1]
    # allowed by the service it starts, stopped through the socket
    from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_checks import stop_target
    assert stop_target(busy[0], {'foo.service'}, set()) == 'foo.socket'


def test_list_sockets_is_not_read_without_a_systemd_owned_listener():
    def boom():
        raise AssertionError('read')
    H.attach_socket_units([dict(port=1, pid=5, unit='a.service')], boom)


@pytest.mark.parametrize('policy, update_rc, changed, warns', [
    ('always', 0, True, False), ('unless-stopped', 0, True, False), ('no', 0, False, False),
    ('', 0, False, False), ('always', 125, False, True)])
def test_container_restart_policy(policy, update_rc, changed, warns):
    ops = FakeOps(policies={'old-grafana': policy}, update_rc=update_rc)
    rec = H.plan_off('container:old-grafana', 'podman', ops)
    mod = FakeModule()
    H.keep_off(mod, ops, rec, {})
    assert rec['restart_policy_changed'] is changed and bool(mod.warnings) is warns
    assert (('update', 'podman', 'old-grafana', 'no') in ops.calls) is (policy not in ('', 'no'))
    if warns:
        assert 'podman' in mod.warnings[0] and 'always' in mod.warnings[0]


def test_state_lines_before_and_after():
    ops = FakeOps(units={'g.service': svc('enabled', TriggeredBy='g.socket'), 'g.socket': svc('enabled'),
                         'd.service': svc('disabled')})
    recs = [H.plan_off('g.service', None, ops), H.plan_off('d.service', None, ops)]
    assert H.state_lines(recs, after=False) == ['unit d.service disabled active', 'unit g.service enabled active',
                                                'unit g.socket enabled active']
    assert H.state_lines(recs, after=True) == ['unit d.service disabled inactive', 'unit g.service disabled inactive',
                                               'unit g.socket disabled inactive']


def test_record_roundtrip_and_restore_puts_back_exactly_what_was_there():
    ops = FakeOps(units={'grafana-server.service': svc('enabled', TriggeredBy='grafana.socket'),
                         'grafana.socket': svc('enabled'), 'adhoc.service': svc('disabled')},
                  policies={'old': 'always'})
    recs = [H.plan_off('grafana-server.service', None, ops), H.plan_off('adhoc.service', None, ops),
            H.plan_off('container:old', 'docker', ops)]
    recs[2]['restart_policy_changed'] = True
    text = '\n'.join(H.record_lines(recs)) + '\n'
    assert all(json.loads(line) for line in text.splitlines())
    plan = H.restore_plan(H.parse_record(text))
    assert plan == [
        dict(kind='unit', name='grafana.socket', enable=True, runtime=False, start=True),
        dict(kind='unit', name='grafana-server.service', enable=True, runtime=False, start=True),
        dict(kind='unit', name='adhoc.service', enable=False, runtime=False, start=True),
        dict(kind='container', engine='docker', name='old', restart_policy='always', start=True)]


def test_restore_first_record_of_a_name_wins():
    first = dict(kind='unit', name='g.service', enabled='enabled', active=True, disable=True, sockets=[], services=[])
    later = dict(first, enabled='disabled', disable=False)  # a second run saw it disabled (by us)
    plan = H.restore_plan([first, later])
    assert plan == [dict(kind='unit', name='g.service', enable=True, runtime=False, start=True)]


def test_restore_reads_the_old_one_name_a_line_format():
    plan = H.restore_plan(H.parse_record('grafana-server.service\ncontainer:docker:old-grafana\n\n'))
    assert plan == [dict(kind='unit', name='grafana-server.service', enable=False, runtime=False, start=True),
                    dict(kind='container', engine='docker', name='old-grafana', restart_policy=None, start=True)]


def test_restore_container_policy_left_alone_when_not_changed():
    rec = dict(kind='container', engine='podman', name='c', active=True, restart_policy='always',
               set_restart_no=True, restart_policy_changed=False)
    assert H.restore_plan([rec])[0]['restart_policy'] is None


@pytest.mark.parametrize('text', ['{not json', '{"kind": "x", "name": "a"}', '{"kind": "unit"}', 'container:podman'])
def test_bad_record_lines_are_named(text):
    with pytest.raises(ValueError) as e:
        H.parse_record(text)
    assert 'line' in str(e.value)


def test_restore_plan_filter_names_the_file():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.vllm_pd.ascend.plugins.filter.pd_restore_plan import pd_restore_plan
    assert pd_restore_plan('') == []
    with pytest.raises(AnsibleFilterError) as e:
        pd_restore_plan('{bad')
    assert '/etc/vllm-pd/stopped-services' in str(e.value)


# the module: stop, disable, sockets; check mode and diff show it without doing it

@pytest.fixture
def systemctl_table(monkeypatch):
    """run_command answers systemctl show from a table and records every other call."""
    table = {'grafana-server.service': svc('enabled', TriggeredBy='grafana.socket'), 'grafana.socket': svc('enabled')}
    calls = []
    children = {}

    def run_command(self, argv, **kw):
        if argv[1] == 'show':
            unit = argv[-1]
            if unit not in table:
                return 1, '', 'not loaded'
            return 0, ''.join('%s=%s\n' % kv for kv in dict(table[unit], Id=unit).items()), ''
        calls.append(argv[1:])
        if argv[1] == 'stop' and argv[-1] in children:
            children[argv[-1]].stop()
        return 0, '', ''
    monkeypatch.setattr(M.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(M.AnsibleModule, 'get_bin_path', lambda self, name, **kw: '/usr/bin/' + name)
    return dict(table=table, calls=calls, children=children)


@pytest.fixture
def as_unit(monkeypatch):
    units = {}
    orig = M.HostOps.process_info

    def process_info(self, pid):
        info = dict(orig(self, pid))
        if pid in units:
            info['unit'] = units[pid]
        return info
    monkeypatch.setattr(M.HostOps, 'process_info', process_info)
    return units


def test_module_stops_and_disables_an_allowed_enabled_holder_and_its_socket(run_module, free_group, spawn_listener,
                                                                            systemctl_table, as_unit):
    ports = free_group(2)
    grafana = spawn_listener(HOST, ports[1])
    as_unit[grafana.pid] = 'grafana-server.service'
    systemctl_table['children']['grafana-server.service'] = grafana
    a = dict(kv_port=ports[0], tp_size=2, host_ip=HOST, npu_count=8, stop_services=['grafana-server'], timeout=5)
    failed, res = run_module(M, dict(a, _ansible_check_mode=True, _ansible_diff=True))
    assert not failed and res['changed'] and systemctl_table['calls'] == [] and grafana.alive()
    assert res['holders_off'][0]['name'] == 'grafana-server.service' and res['holders_off'][0]['disable']
    assert 'unit grafana-server.service enabled active' in res['diff']['before']
    assert 'unit grafana-server.service disabled inactive' in res['diff']['after']
    assert 'unit grafana.socket disabled inactive' in res['diff']['after']
    failed, res = run_module(M, a)
    assert not failed, res.get('msg')
    assert systemctl_table['calls'] == [['stop', '--', 'grafana.socket'], ['disable', '--', 'grafana.socket'],
                                        ['stop', '--', 'grafana-server.service'],
                                        ['disable', '--', 'grafana-server.service']]
    assert not grafana.alive()
    assert H.restore_plan(res['holders_off'])[0] == dict(kind='unit', name='grafana.socket', enable=True,
                                                         runtime=False, start=True)


def test_module_never_disables_a_holder_that_is_not_allowed(run_module, free_group, spawn_listener, systemctl_table,
                                                            as_unit):
    ports = free_group(2)
    grafana = spawn_listener(HOST, ports[0])
    as_unit[grafana.pid] = 'grafana-server.service'
    failed, res = run_module(M, dict(kv_port=ports[0], tp_size=2, host_ip=HOST, npu_count=8))
    assert failed and systemctl_table['calls'] == [] and grafana.alive()
