# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The parsers against the exact samples of shared/docs/ascend-node-facts.md §1-§4."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu import npu_parse as P

PING_OK = """device 3 PING 29.1.137.205
recv seq=0,time=1.418000ms
recv seq=1,time=0.034000ms
recv seq=2,time=0.040000ms
3 packets transmitted, 3 received, 0.00% packet loss
"""
PING_LOSS = """device 3 PING 29.1.137.205
recv time out seq=0
recv seq=1,time=0.034000ms
recv seq=2,time=0.040000ms
3 packets transmitted, 2 received, 33.33% packet loss
"""
HCCS_PING = """device 0 PING 192.40.2.189

This pkt ping success!
recv seq 0, time = 12.345us, L1 plane check result = 0x0
3 packets transmitted, 3 received, 0.00% packets loss
"""
HCCN_CONF = """address_0=29.1.137.205
netmask_0=255.255.0.0
netdetect_0=29.1.0.1
gateway_0=29.1.0.1
send_arp_status_0=1
address_7=29.1.170.143
tls_enable_7=0
arp_7=-i eth0 -s 29.1.0.1 00:11:22:33:44:55
"""
SMI_A2 = """+------------------------------------------------------------------------------------------------+
| npu-smi 25.2.0                   Version: 25.2.0                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 97.9        34                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3408 / 65536         |
+===========================+===============+====================================================+
| 2     910B3               | Alarm         | 97.9        34                0    / 0             |
| 0                         | 0000:C3:00.0  | 0           0    / 0          3408 / 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU   Chip                | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| No running processes found in NPU 0                                                            |
+===========================+===============+====================================================+
| 2       0                 | 1333928       |                          | 37709                   |
+===========================+===============+====================================================+
"""
SMI_A3 = """+------------------------------------------------------------------------------------------------+
| npu-smi 25.2.3                   Version: 25.2.3                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     Ascend910           | OK            | 160.1       40                0    / 0             |
| 0     0                   | 0000:9D:00.0  | 0           0    / 0          3408 / 65536         |
| 1     1                   | 0000:9F:00.0  | 0           0    / 0          3408 / 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| 0       1                 | 3328327       | python3                  | 40000                   |
+===========================+===============+====================================================+
"""


def test_link_net_health_tls_ip():
    assert P.parse_link('link status: UP\n') == 'UP'
    assert P.parse_link('link status: DOWN\n') == 'DOWN'
    assert P.parse_link('Command execute failed!') is None
    assert P.parse_net_health('net health status: Success\n') == 'Success'
    assert P.parse_net_health('net health status: Socket fail\n') == 'Socket fail'
    assert P.parse_tls('dev_id:0, tls switch[0](0:disable, 1:enable), tls preconfigured[1](0:non-preset, '
                       '1:preset), tls alarm time threshold[60]days') == 0
    assert P.parse_tls('dev_id:5, tls switch[1](0:disable, 1:enable), ...') == 1
    assert P.parse_ip('ipaddr:10.10.0.10\nnetmask:255.255.255.0\n') == dict(ipaddr='10.10.0.10', netmask='255.255.255.0')
    assert P.parse_ip('') is None


def test_ping_samples():
    ok = P.parse_ping(PING_OK)
    assert (ok['peer'], ok['sent'], ok['received'], ok['loss'], ok['timeouts']) == ('29.1.137.205', 3, 3, 0.0, 0)
    bad = P.parse_ping(PING_LOSS)
    assert (bad['received'], bad['loss'], bad['timeouts']) == (2, 33.33, 1)
    assert P.parse_ping(HCCS_PING)['received'] == 3          # "packets loss" of -hccs_ping
    assert P.parse_ping('Command execute failed!') is None


def test_hccn_conf():
    conf = P.parse_hccn_conf(HCCN_CONF)
    assert conf[0] == dict(address='29.1.137.205', netmask='255.255.0.0', netdetect='29.1.0.1', gateway='29.1.0.1',
                           send_arp_status='1')
    assert conf[7]['address'] == '29.1.170.143' and conf[7]['tls_enable'] == '0'
    assert conf[7]['arp'] == '-i eth0 -s 29.1.0.1 00:11:22:33:44:55'


def test_versions():
    info = ('Version=23.0.7\nascendhal_version=7.35.19\nInnerversion=V100R001C15SPC012B220\n'
            'compatible_version_fw=[7.0.0,7.1.99]\npackage_version=23.0.7\n')
    assert P.driver_version(info) == '23.0.7'
    assert P.driver_version('Version=24.1.0\n') == '24.1.0'
    assert P.driver_version('') is None
    assert P.cann_version('package_name=Ascend-cann-toolkit\nversion=8.5.0\narch=aarch64\n') == '8.5.0'
    assert P.cann_version(None, 'runtime_running_version=[7.6.0.1.220:8.0.0]\n') == '8.0.0'
    assert P.cann_version(None, None) is None


def test_npu_smi_a2():
    s = P.parse_npu_smi_info(SMI_A2)
    assert s['version'] == '25.2.0' and not s['a3']
    assert s['chips'][0]['health'] == 'OK' and s['chips'][2]['health'] == 'Alarm'
    assert s['processes'] == [dict(npu=2, chip=0, phy_id=2, pid=1333928, name='', memory_mb=37709)]


def test_npu_smi_a3_maps_chip_to_physical_id():
    s = P.parse_npu_smi_info(SMI_A3)
    assert s['a3'] and sorted(s['chips']) == [0, 1]
    assert s['processes'][0]['phy_id'] == 1 and s['processes'][0]['name'] == 'python3'


def test_npu_smi_wider_columns():
    wide = SMI_A2.replace('| 0     910B3               |', '| 0     910B3                     |')
    assert P.parse_npu_smi_info(wide)['chips'][0]['health'] == 'OK'
    assert P.parse_npu_smi_info('dcmi module initialize failed. ret is -8005') is None


@pytest.mark.parametrize('argv, size, memlock, mounts', [
    (['--shm-size=16g', '--ulimit=memlock=-1:-1', '--volume=/etc/hccn.conf:/etc/hccn.conf:ro'],
     16 * 1024 ** 3, True, ['/etc/hccn.conf']),
    (['--shm-size', '512m', '--ulimit', 'memlock=65536', '-v', '/a:/b'], 512 * 1024 ** 2, False, ['/b']),
    (['--mount', 'type=bind,source=/x,target=/usr/local/Ascend/driver/tools/hccn_tool'], None, False,
     ['/usr/local/Ascend/driver/tools/hccn_tool']),
])
def test_run_options(argv, size, memlock, mounts):
    sizes = P.run_option_values(argv, '--shm-size')
    assert (P.parse_size(sizes[0]) if sizes else None) == size
    assert P.memlock_unlimited(argv) is memlock
    assert P.mounted_paths(argv) == mounts


def test_mountinfo_size():
    line = '123 45 0:50 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=65536k\n'
    assert P.parse_mountinfo_size(line) == 64 * 1024 ** 2
