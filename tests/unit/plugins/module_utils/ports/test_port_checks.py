# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import port_checks as C

INFO = {
    812: dict(name='grafana', cmdline='/usr/share/grafana/bin/grafana server', unit='grafana-server.service'),
    813: dict(name='prometheus', cmdline='prometheus', unit='prometheus.service'),
    900: dict(name='vllm', cmdline='vllm serve', unit='vllm-prefill.service'),
    950: dict(name='python3', cmdline='python3 -m http.server 30008', unit='session-3.scope'),
    960: dict(name='node', cmdline='node app', unit='docker-abc.scope', container='abc' * 10,
              container_runtime='docker'),
    970: dict(name='python3', cmdline='python3 -m http.server', unit='libpod-' + 'f' * 64 + '.scope',
              container='f' * 64, container_runtime='podman', container_name='old-grafana'),
    980: dict(name='pause', cmdline='/pause', unit=None, container='e' * 64, container_runtime='cri-o'),
}


def sock(port, addr='0.0.0.0', state='LISTEN', inode=None, fam='tcp'):
    return dict(port=port, address=addr, family=fam, state=state, inode=inode if inode is not None else port,
                remote_address='10.0.0.9', remote_port=40000)


def holders(socks, owners):
    return C.build_holders(socks, owners, INFO.get)


def test_build_holders_and_describe():
    hs = holders([sock(30004), sock(30003, state='ESTABLISHED'), sock(30005, inode=0)],
                 {30004: [812, 814], 30003: [813]})
    assert [h['port'] for h in hs] == [30003, 30004, 30005]
    g = hs[1]
    assert g['pid'] == 812 and g['pids'] == [812, 814] and g['unit'] == 'grafana-server.service'
    d = C.describe_holder(g)
    assert '0.0.0.0:30004' in d and 'pid 812' in d and 'grafana-server.service' in d and 'grafana server' in d
    assert 'ESTABLISHED connection to 10.0.0.9:40000' in C.describe_holder(hs[0])
    assert 'not visible' in C.describe_holder(hs[2])


def test_plan_stops_only_allowed_units():
    hs = holders([sock(30004), sock(30005), sock(30006), sock(30008), sock(30009)],
                 {30004: [812], 30005: [812], 30006: [813], 30008: [950], 30009: [960]})
    units, findings = C.plan_stops(hs, ['grafana-server'])
    assert units == ['grafana-server.service']
    assert [f['ports'] for f in findings] == [[30006], [30008], [30009]]
    prom, plain, cont = (f['msg'] for f in findings)
    assert 'add prometheus.service to vllm_pd_stop_services' in prom and 'pid 813' in prom
    assert 'never killed' in plain and 'pid 950' in plain and 'http.server' in plain
    assert 'add container:abcabcabcabc to vllm_pd_stop_services' in cont and 'docker stop abcabcabcabc' in cont


def test_plan_stops_allowed_containers_by_name_or_id():
    hs = holders([sock(30004), sock(30005), sock(30006)], {30004: [970], 30005: [960], 30006: [812]})
    targets, findings = C.plan_stops(hs, ['container:old-grafana', 'container:' + 'abc' * 4, 'grafana-server'])
    assert targets == ['container:abcabcabcabc', 'container:old-grafana', 'grafana-server.service']
    assert findings == []
    # the same holders with only the unit allowed: both containers are errors that name them
    targets, findings = C.plan_stops(hs, ['grafana-server'])
    assert targets == ['grafana-server.service']
    msgs = [f['msg'] for f in findings]
    assert 'container old-grafana is not allowed' in msgs[0] and 'podman stop old-grafana' in msgs[0]
    assert 'container:old-grafana' in msgs[0] and 'container abcabcabcabc is not allowed' in msgs[1]


def test_plan_stops_container_of_another_runtime_is_never_stopped():
    hs = holders([sock(30004)], {30004: [980]})
    targets, findings = C.plan_stops(hs, ['container:' + 'e' * 64])
    assert targets == [] and 'cri-o container eeeeeeeeeeee' in findings[0]['msg']


def test_parse_stop_services():
    assert C.parse_stop_services(['grafana-server', 'container:old_g.1', '', 'x.scope']) == (
        set(['grafana-server.service', 'x.scope']), set(['old_g.1']))
    with pytest.raises(ValueError, match="'container:-rm'"):
        C.parse_stop_services(['container:-rm'])
    with pytest.raises(ValueError):
        C.parse_stop_services(['container:'])


def test_stop_target_unit_wins_and_diff_lines_name_containers():
    h = holders([sock(30004)], {30004: [970]})[0]
    assert C.stop_target(h, set([h['unit']]), set(['old-grafana'])) == h['unit']
    assert C.stop_target(h, set(), set(['old-grafana'])) == 'container:old-grafana'
    assert C.stop_target(h, set(), set(['f' * 12])) == 'container:old-grafana'
    assert C.stop_target(h, set(), set(['other'])) is None
    assert C.holder_lines([h])[0].endswith('container=old-grafana')


def test_plan_stops_invisible_owner():
    units, findings = C.plan_stops(holders([sock(30003)], {}), [])
    assert units == [] and 'become' in findings[0]['msg']


def test_split_holders_by_owner():
    hs = holders([sock(30002), sock(30003), sock(30004)], {30002: [900], 30003: [812]})
    owned, others = C.split_holders(hs, lambda h: h['unit'] == 'vllm-prefill.service')
    assert [h['port'] for h in owned] == [30002] and [h['port'] for h in others] == [30003, 30004]
    assert C.split_holders(hs, None) == ([], hs)


def test_a_connection_of_the_owners_listener_no_process_holds_is_the_owners():
    """Under traffic a running engine's group has connections its listener accepted and closed (FIN_WAIT2,
    LAST_ACK: no process holds them), and on a loaded host connections still waiting in its accept queue (inode 0:
    ESTABLISHED, or CLOSE_WAIT when the peer closed first); on a port the owner listens on they are the owner's, not
    a holder. Elsewhere, or while the owner does not listen, or held by a process, they stay holders."""
    hs = holders([sock(30002), sock(30002, state='FIN_WAIT2', inode=0), sock(30002, state='LAST_ACK', inode=0),
                  sock(30003, state='FIN_WAIT2', inode=0), sock(30002, state='CLOSE_WAIT', inode=0),
                  sock(30002, state='ESTABLISHED', inode=0), sock(30003, state='ESTABLISHED', inode=0),
                  sock(30002, state='ESTABLISHED', inode=7)],
                 {30002: [900], 7: [812]})
    owned, others = C.split_holders(hs, lambda h: h['unit'] == 'vllm-prefill.service')
    assert sorted((h['port'], h['state'], h['inode']) for h in owned) == [
        (30002, 'CLOSE_WAIT', 0), (30002, 'ESTABLISHED', 0), (30002, 'FIN_WAIT2', 0), (30002, 'LAST_ACK', 0),
        (30002, 'LISTEN', 30002)]
    assert sorted((h['port'], h['state']) for h in others) == [
        (30002, 'ESTABLISHED'), (30003, 'ESTABLISHED'), (30003, 'FIN_WAIT2')]
    not_listening = [h for h in hs if h['state'] != 'LISTEN']
    assert C.split_holders(not_listening, lambda h: h['unit'] == 'vllm-prefill.service')[0] == []


def test_normalize_unit():
    assert C.normalize_unit('grafana-server') == 'grafana-server.service'
    assert C.normalize_unit('docker-x.scope') == 'docker-x.scope'


def expected_unit(h):
    return any(INFO.get(p, {}).get('unit') == 'vllm-prefill.service' for p in h['pids'])


def test_evaluate_listening_all_ok():
    hs = holders([sock(p, '10.0.30.10') for p in (30002, 30003)], {30002: [900], 30003: [900]})
    ev = C.evaluate_listening([30002, 30003], '10.0.30.10', hs, expected_unit)
    assert ev['closed'] == [] and len(ev['ok']) == 2 and not ev['foreign']


def test_evaluate_listening_grafana_trap():
    hs = holders([sock(30002, '10.0.30.10'), sock(30003, '0.0.0.0')], {30002: [900], 30003: [812]})
    ev = C.evaluate_listening([30002, 30003], '10.0.30.10', hs, expected_unit)
    assert [h['port'] for h in ev['foreign']] == [30003]


def test_evaluate_listening_wrong_address_and_closed():
    hs = holders([sock(30002, '127.0.0.1'), sock(30003, '127.0.0.1')], {30002: [900], 30003: [812]})
    ev = C.evaluate_listening([30002, 30003, 30004], '10.0.30.10', hs, expected_unit)
    assert [h['port'] for h in ev['wrong_address']] == [30002]
    assert ev['closed'] == [30003, 30004]
    assert [h['port'] for h in ev['misleading']] == [30003]


def test_evaluate_listening_without_owner():
    hs = holders([sock(30002, '10.0.30.10'), sock(30003, '0.0.0.0')], {30002: [812], 30003: [812]})
    ev = C.evaluate_listening([30002, 30003], '10.0.30.10', hs, lambda h: None)
    assert [h['port'] for h in ev['ok']] == [30002]
    assert [h['port'] for h in ev['wrong_address']] == [30003]


def test_evaluate_listening_wildcard_host():
    hs = holders([sock(30002, '127.0.0.1')], {30002: [900]})
    ev = C.evaluate_listening([30002], '0.0.0.0', hs, expected_unit)
    assert len(ev['ok']) == 1


def test_holder_lines():
    hs = holders([sock(30004)], {30004: [812]})
    assert C.holder_lines(hs) == ['0.0.0.0:30004 LISTEN pid=812 grafana unit=grafana-server.service']
