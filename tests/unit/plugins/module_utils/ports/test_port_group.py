# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import port_windows as pw
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import port_group as pg

WINDOWS = [
    ('AdxlWindow', 'ADXL window', (20000, 27999), 'hint'),
    ('TeRpcRange', 'TE RPC range', pw.TE_RPC_RANGE, 'hint'),
    ('HcclRange', 'HCCL range', pw.HCCL_RANGE, 'hint'),
]


@pytest.mark.parametrize('args, expected', [
    ((30002, 8), list(range(30002, 30010))),
    ((28002, 1), [28002]),
    # dp ranks 2 and 3 of tp=2 pp=2 on this host: 4 ports per rank
    ((28000, 2, 2, 1, 2, 2), list(range(28008, 28016))),
    ((28000, 2, 1, 2, 0, 2), list(range(28000, 28008))),
    ((28000, 4, 1, 1, 1, 1), [28004, 28005, 28006, 28007]),
])
def test_port_group_formula(args, expected):
    assert pg.port_group(*args) == expected


@pytest.mark.parametrize('bad', [dict(tp_size=0), dict(pp_size=0), dict(dp_size_local=0), dict(dp_rank_start=-1)])
def test_port_group_rejects_bad_sizes(bad):
    with pytest.raises(ValueError):
        pg.port_group(28000, **bad)


@pytest.mark.parametrize('text, ranges', [
    ('', []),
    ('\n', []),
    ('8080', [(8080, 8080)]),
    ('9000-9010,8080', [(8080, 8080), (9000, 9010)]),
    ('1-3,4,6-7\n', [(1, 4), (6, 7)]),
    ('10-5', [(5, 10)]),
])
def test_parse_port_list(text, ranges):
    assert pg.parse_port_list(text) == ranges


def test_format_roundtrip():
    assert pg.format_port_list([(36000, 36007), (8080, 8080)]) == '8080,36000-36007'
    assert pg.format_port_list(pg.ports_to_ranges([5, 6, 7, 9])) == '5-7,9'


def test_parse_local_port_range():
    assert pg.parse_local_port_range('32768\t60999\n') == (32768, 60999)
    with pytest.raises(ValueError):
        pg.parse_local_port_range('garbage')


def test_adxl_window():
    assert pw.adxl_window(20000, 8) == (20000, 27999)
    assert pw.adxl_window(30000, 16) == (30000, 45999)
    assert pw.adxl_window(20000, 0) is None


def test_detect_npu_count(tmp_path):
    for name in ('davinci0', 'davinci1', 'davinci7', 'davinci_manager', 'davinci1x'):
        (tmp_path / name).write_text('')
    assert pg.detect_npu_count(str(tmp_path)) == 3


def test_read_sysctl_ranges(tmp_path):
    d = tmp_path / 'sys' / 'net' / 'ipv4'
    d.mkdir(parents=True)
    (d / 'ip_local_port_range').write_text('40000\t50000\n')
    (d / 'ip_local_reserved_ports').write_text('41000-41007\n')
    assert pg.read_sysctl_ranges(str(tmp_path)) == ((40000, 50000), [(41000, 41007)])
    assert pg.read_sysctl_ranges(str(tmp_path / 'missing')) == (pg.DEFAULT_EPHEMERAL_RANGE, [])


def checks(findings):
    return sorted(f['check'] for f in findings)


def test_clean_group_has_no_findings():
    assert pg.range_findings(pg.port_group(28002, 8), WINDOWS, (32768, 60999), []) == []


def test_report_case_kv_port_in_adxl_window():
    f = pg.range_findings(pg.port_group(20002, 8), WINDOWS, (32768, 60999), [])
    assert checks(f) == ['AdxlWindow']
    assert f[0]['ports'] == list(range(20002, 20010))
    assert '20002-20009' in f[0]['msg'] and '20000-27999' in f[0]['msg']


def test_partial_overlap_names_only_overlapping_ports():
    f = pg.range_findings(pg.port_group(27996, 8), WINDOWS, None, [])
    assert f[0]['ports'] == [27996, 27997, 27998, 27999]


def test_te_hccl_and_range():
    assert checks(pg.range_findings(pg.port_group(16998, 8), WINDOWS)) == ['TeRpcRange']
    assert checks(pg.range_findings(pg.port_group(60030, 4), WINDOWS)) == ['HcclRange']
    f = pg.range_findings(pg.port_group(65530, 8), WINDOWS)
    assert checks(f) == ['PortRange'] and f[0]['ports'] == [65536, 65537]
    assert checks(pg.range_findings(pg.port_group(1020, 8), WINDOWS)) == ['PortRange']


def test_ephemeral_not_reserved_names_sysctl_line():
    f = pg.range_findings(pg.port_group(36000, 8), WINDOWS, (32768, 60999), [(8080, 8080)])
    assert checks(f) == ['EphemeralRange']
    assert f[0]['sysctl'] == 'net.ipv4.ip_local_reserved_ports = 8080,36000-36007'
    assert 'net.ipv4.ip_local_reserved_ports = 8080,36000-36007' in f[0]['msg']


def test_ephemeral_reserved_is_fine_and_partial_reservation():
    assert pg.range_findings(pg.port_group(36000, 8), WINDOWS, (32768, 60999), [(36000, 36007)]) == []
    f = pg.range_findings(pg.port_group(36000, 8), WINDOWS, (32768, 60999), [(36000, 36003)])
    assert f[0]['ports'] == [36004, 36005, 36006, 36007]


def test_extra_reserved():
    f = pg.range_findings(pg.port_group(28000, 8), WINDOWS, None, None, [(28005, 28005), (9000, 9001)])
    assert checks(f) == ['ReservedPort'] and f[0]['ports'] == [28005]


def test_several_causes_all_listed():
    f = pg.range_findings(pg.port_group(60020, 16), WINDOWS, (32768, 60999), [], [(60035, 60035)])
    assert checks(f) == ['EphemeralRange', 'HcclRange', 'ReservedPort']


def test_reserved_with():
    new, changed = pg.reserved_with([(8080, 8080)], [36000, 36001])
    assert new == [(8080, 8080), (36000, 36001)] and changed
    assert pg.reserved_with(new, [36000]) == (new, False)


def test_reserved_windows_defaults():
    w = pw.reserved_windows({}, npu_count=8)
    assert w == dict(ascend_base_port=20000, adxl=(20000, 27999), te_rpc=(15000, 17000), hccl=(60000, 60031), moved=[])


def test_reserved_windows_move_with_the_engine_environment():
    w = pw.reserved_windows({'ASCEND_BASE_PORT': '30000', 'MC_MIN_RPC_PORT': '40000', 'MC_MAX_RPC_PORT': 41000,
                            'HCCL_IF_BASE_PORT': '50000'}, npu_count=2)
    assert (w['adxl'], w['te_rpc'], w['hccl']) == ((30000, 31999), (40000, 41000), (50000, 50031))
    assert w['moved'] == ['ASCEND_BASE_PORT', 'MC_MIN_RPC_PORT', 'MC_MAX_RPC_PORT', 'HCCL_IF_BASE_PORT']
    # Mooncake v0.3.9's misspelling counts; the right spelling wins when both are set
    assert pw.reserved_windows({'MC_MIN_PRC_PORT': '16000'})['te_rpc'] == (16000, 17000)
    assert pw.reserved_windows({'MC_MIN_PRC_PORT': '16000', 'MC_MIN_RPC_PORT': '15500'})['te_rpc'] == (15500, 17000)
    assert pw.reserved_windows({}, npu_count=0)['adxl'] is None


@pytest.mark.parametrize('env, words', [
    ({'ASCEND_BASE_PORT': 'abc'}, 'ASCEND_BASE_PORT=abc'),
    ({'HCCL_IF_BASE_PORT': '70000'}, 'HCCL_IF_BASE_PORT=70000'),
    ({'HCCL_IF_BASE_PORT': '65530'}, 'no room'),
    ({'MC_MIN_RPC_PORT': '17001'}, 'RPC range is empty'),
])
def test_reserved_windows_refuse_values_that_are_not_ports(env, words):
    with pytest.raises(ValueError) as e:
        pw.reserved_windows(env)
    assert words in str(e.value)


@pytest.mark.parametrize('tp, pp, pcp, rank', [(1, 1, 1, 0), (2, 2, 1, 1), (4, 1, 2, 3), (2, 2, 2, 2), (8, 3, 1, 0)])
def test_port_group_is_the_connector_formula(tp, pp, pcp, rank):
    # vllm-ascend 0.23 mooncake_connector: kv_port + dp_rank*tp*pp*pcp + (pp_rank*pcp + pcp_rank)*tp + tp_rank
    want = [30000 + rank * tp * pp * pcp + (p * pcp + c) * tp + t
            for p in range(pp) for c in range(pcp) for t in range(tp)]
    assert pg.port_group(30000, tp, pp_size=pp, pcp_size=pcp, dp_rank_start=rank) == want


def test_api_port_checks_only_units_that_do_not_run_prefill_first():
    from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import api_port_checks
    instances = {'decode': [{'name': 'd0', 'unit': 'vllm-pd-decode-0.service', 'api_port': 9100}],
                 'prefill': [{'name': 'p0', 'unit': 'vllm-pd-prefill-0.service', 'api_port': 9000},
                             {'name': 'p1', 'unit': 'vllm-pd-prefill-1.service', 'api_port': '9001'}]}
    assert api_port_checks(instances, ['vllm-pd-prefill-0.service']) == [
        {'what': 'p1 API', 'port': '9001', 'var': 'prefill_api_port'},
        {'what': 'd0 API', 'port': 9100, 'var': 'decode_api_port'}]
    assert api_port_checks({'prefill': [], 'decode': []}, []) == []


def test_instance_ports_defaults_pp_and_pcp_to_one():
    from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import instance_ports
    assert instance_ports({'kv_port': '100', 'tp': 2, 'port_rank_start': 1, 'dp_size_local': 2}) == [102, 103, 104, 105]
