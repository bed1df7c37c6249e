# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What module pd_host_read makes of a host's answers (module_utils/host/host_read.py)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import host_read

LIST_UNITS = """vllm-pd-decode.service  loaded active   running Vllm PD decode
vllm-pd-prefill.service loaded activating auto-restart Vllm PD prefill
vllm-pd-proxy.service   loaded active   running Vllm PD proxy
vllm-pd-old.service     loaded inactive dead    an earlier layout
vllm-pd-gone.service    not-found
"""


def test_machine_is_the_boot_id_and_the_device_and_inode_or_nothing():
    assert host_read.machine('0d6a-77\n', 2049, 131) == '0d6a-77 2049:131'
    assert host_read.machine('', 2049, 131) == '' and host_read.machine(None, 1, 2) == ''
    assert host_read.machine('0d6a', None, None) == ''


def test_units_and_the_active_ones():
    lines = host_read.unit_lines('\n' + LIST_UNITS + '\n')
    assert len(lines) == 5 and lines[0].startswith('vllm-pd-decode.service')
    active = host_read.active_units(lines)
    assert active == ['vllm-pd-decode.service', 'vllm-pd-prefill.service', 'vllm-pd-proxy.service']
    assert host_read.engine_units(active) == ['vllm-pd-decode.service', 'vllm-pd-prefill.service']
    assert host_read.unit_lines('') == [] and host_read.active_units([]) == []


def test_main_pid_and_command_line():
    assert host_read.main_pid('1234\n') == 1234
    assert host_read.main_pid('0\n') is None and host_read.main_pid('') is None and host_read.main_pid('n/a') is None
    assert host_read.cmdline_words(b'vllm\0serve\0/m\0\xff\0') == ['vllm', 'serve', '/m', u'\ufffd']
    assert host_read.cmdline_words(b'') == []
