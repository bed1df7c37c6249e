# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""check_free: the free check with plain arguments (no AnsibleModule), against real sockets."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import port_free as F
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.host_ops import HostOps
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.params import ParamError

HOST = '127.0.0.2'


class Ops(HostOps):
    """The real host reads; the sysctl ranges fixed so the machine's ephemeral range does not matter."""

    def sysctl_ranges(self):
        return (40000, 60999), []


def test_free_group_has_no_findings(free_group):
    ports = free_group(4)
    r = F.check_free(ports[0], 4, host_ip=HOST, npu_count=8, ops=Ops())
    assert r['ports'] == ports and r['findings'] == [] and r['host_ip'] == HOST


def test_busy_port_names_port_pid_and_fix(free_group, spawn_listener):
    ports = free_group(4)
    other = spawn_listener(HOST, ports[2])
    r = F.check_free(ports[0], 4, host_ip=HOST, npu_count=8, ops=Ops())
    busy = [f for f in r['findings'] if f['check'] == 'PortBusy']
    assert len(busy) == 1 and busy[0]['port'] == ports[2] and busy[0]['pid'] == other.pid
    assert 'kill %d' % other.pid in busy[0]['fix'] and other.alive()


def test_owner_pid_holds_its_own_ports(free_group, spawn_listener):
    ports = free_group(4)
    vllm = spawn_listener(HOST, ports[:2])
    r = F.check_free(ports[0], 4, host_ip=HOST, npu_count=8, owner_pid=vllm.pid, ops=Ops())
    assert r['findings'] == [] and sorted(h['port'] for h in r['held_by_owner']) == ports[:2]


def test_static_window_finding_has_a_fix():
    r = F.check_free(20002, 8, host_ip=HOST, npu_count=8, ops=Ops())
    adxl = [f for f in r['findings'] if f['check'] == 'AdxlWindow']
    assert adxl and adxl[0]['fix'] and adxl[0]['ports'] == list(range(20002, 20010))


def test_address_not_on_host_is_a_finding():
    r = F.check_free(28002, 1, host_ip='192.0.2.77', npu_count=8, ops=Ops())
    assert [f['check'] for f in r['findings']] == ['HostIp']


def test_no_npu_found_warns_and_assumes_eight(tmp_path):
    ops = Ops(dev_root=str(tmp_path))
    r = F.check_free(28002, 1, host_ip=HOST, ops=ops)
    assert any('no /dev/davinciN' in w for w in r['warnings'])


def test_ascend_base_port_is_given_not_read_from_this_process(monkeypatch):
    # the module's own environment is not the engine's: only the value passed counts
    monkeypatch.setenv('ASCEND_BASE_PORT', '28000')
    r = F.check_free(28002, 1, host_ip=HOST, npu_count=1, ops=Ops())
    assert [f['check'] for f in r['findings']] == []
    r = F.check_free(28002, 1, host_ip=HOST, npu_count=1, ascend_base_port=28000, ops=Ops())
    assert [f['check'] for f in r['findings']] == ['AdxlWindow']
    with pytest.raises(ParamError) as e:
        F.check_free(28002, 1, host_ip=HOST, npu_count=1, ascend_base_port=70000, ops=Ops())
    assert 'ascend_base_port' in str(e.value)


def test_host_ops_without_module_runs_commands_by_argv():
    ops = HostOps()
    rc, out, _err = ops.run(['/bin/echo', 'a b'])
    assert rc == 0 and out == 'a b\n'
    assert ops.run(['/nonexistent/tool'])[0] == 127
    assert ops.bin_path('sh') and os.path.isabs(ops.bin_path('sh'))
