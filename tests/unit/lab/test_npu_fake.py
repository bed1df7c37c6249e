# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's fake hccn_tool / npu-smi: the facts sheet's formats and exit codes, driven by the state file,
read back with the collection's parsers."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import subprocess
import sys

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.npu import npu_parse as P

FAKE = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'lab', 'npu', 'npu_fake.py')


@pytest.fixture
def fake(tmp_path):
    env = dict(os.environ, VLLM_PD_LAB_NPU_STATE=str(tmp_path / 'npu.json'), VLLM_PD_LAB_NPU_ROOT=str(tmp_path))

    def run(*args):
        r = subprocess.run([sys.executable, FAKE] + list(args), capture_output=True, text=True, env=env, check=False)
        return r.returncode, r.stdout, r.stderr
    assert run('init', '16', '172.28.10.32', '255.255.255.0')[0] == 0
    run.root = tmp_path
    return run


def test_healthy_outputs_parse(fake):
    rc, out, _err = fake('hccn_tool', '-i', '15', '-ip', '-g')
    assert rc == 0 and P.parse_ip(out) == dict(ipaddr='172.28.10.47', netmask='255.255.255.0')
    assert P.parse_link(fake('hccn_tool', '-i', '0', '-link', '-g')[1]) == 'UP'
    assert P.parse_net_health(fake('hccn_tool', '-i', '0', '-net_health', '-g')[1]) == 'Success'
    assert P.parse_tls(fake('hccn_tool', '-i', '0', '-tls', '-g')[1]) == 0
    conf = P.parse_hccn_conf((fake.root / 'etc' / 'hccn.conf').read_text())
    assert conf[15]['address'] == '172.28.10.47'
    smi = P.parse_npu_smi_info(fake('npu-smi', 'info')[1])
    assert smi['a3'] and sorted(smi['chips']) == list(range(16)) and smi['processes'] == []
    info = (fake.root / 'usr/local/Ascend/driver/version.info').read_text()
    assert P.driver_version(info) == '25.2.0'
    # the sh fast path's files say the same as the fake
    assert (fake.root / 'var/lib/vllm-pd-lab/npu-out/3-link').read_text() == 'link status: UP\n'


def test_exit_codes(fake):
    assert fake('hccn_tool', '-i', '16', '-link', '-g')[:3:2] == (4, 'Get invalid device id.\n')
    assert fake('hccn_tool', '-i', '0', '-gateway', '-g')[0] == 2
    assert fake('hccn_tool', '-i', '0', '-bogus', '-g')[2] == 'Command execute failed!\n'


def test_set_drives_every_output(fake):
    fake('set', '2', 'link', 'DOWN', '3', 'conf_ip', '172.28.10.99', '4', 'tls', '1', '5', 'health', 'Alarm',
         '6', 'processes', '[{"pid": 1, "mem": 37709}]', 'global', 'driver_version', '24.1.0')
    assert P.parse_link(fake('hccn_tool', '-i', '2', '-link', '-g')[1]) == 'DOWN'
    assert (fake.root / 'var/lib/vllm-pd-lab/npu-out/2-link').read_text() == 'link status: DOWN\n'
    conf = P.parse_hccn_conf((fake.root / 'etc' / 'hccn.conf').read_text())
    assert conf[3]['address'] == '172.28.10.99'
    assert P.parse_ip(fake('hccn_tool', '-i', '3', '-ip', '-g')[1])['ipaddr'] == '172.28.10.35'
    assert P.parse_tls(fake('hccn_tool', '-i', '4', '-tls', '-g')[1]) == 1
    smi = P.parse_npu_smi_info(fake('npu-smi', 'info')[1])
    assert smi['chips'][5]['health'] == 'Alarm'
    assert [(p['phy_id'], p['pid']) for p in smi['processes']] == [(6, 1)]
    assert P.driver_version((fake.root / 'usr/local/Ascend/driver/version.info').read_text()) == '24.1.0'
    assert fake('set', '2', 'link', 'SIDEWAYS')[0] != 0


def test_set_and_reset_say_changed_only_when_the_state_changes(fake):
    assert fake('set', '2', 'link', 'DOWN')[1] == 'CHANGED\n'
    assert fake('set', '2', 'link', 'DOWN')[1] == ''
    assert fake('reset')[1] == 'CHANGED\n'
    assert P.parse_link(fake('hccn_tool', '-i', '2', '-link', '-g')[1]) == 'UP'
    assert (fake.root / 'var/lib/vllm-pd-lab/npu-out/2-link').read_text() == 'link status: UP\n'
    assert fake('reset')[1] == ''


def test_ping_refuses_off_lab_addresses(fake):
    rc, out, err = fake('hccn_tool', '-i', '0', '-ping', '-g', 'address', '192.0.2.1')
    assert rc == 1 and 'Command execute failed!' in err and 'PING' not in out


def test_renders_at_once_never_show_a_reader_an_empty_or_missing_answer(fake):
    """Two renders at the same time (e.g. a fixture's set while lab_up renders) and a reader between
    them: every read of a cached answer is whole (old or new), as hccn_tool.sh's cat needs."""
    answer = fake.root / 'var' / 'lib' / 'vllm-pd-lab' / 'npu-out' / '1-ip'
    env = dict(os.environ, VLLM_PD_LAB_NPU_STATE=str(fake.root / 'npu.json'), VLLM_PD_LAB_NPU_ROOT=str(fake.root))
    loop = 'for _ in 1 2 3 4 5 6 7 8 9 10 11 12; do "$0" "$1" render || exit 1; done'
    renders = [subprocess.Popen(["sh", "-c", loop, sys.executable, FAKE], env=env) for _worker in range(2)]
    reads = []
    while any(r.poll() is None for r in renders):
        try:
            reads.append(answer.read_text())
        except FileNotFoundError:
            reads.append('missing')
    assert [r.wait() for r in renders] == [0, 0]  # no render failed on a file of the other
    assert len(reads) > 10 and set(reads) == {'ipaddr:172.28.10.33\nnetmask:255.255.255.0\n'}, set(reads)
    assert not [p.name for p in answer.parent.iterdir() if p.name.startswith('.')]  # no temporary file left


def test_answers_of_npus_the_host_no_longer_has_are_removed(fake):
    """A host made again with 8 NPUs instead of 16: hccn_tool.sh must not answer for NPU 12 from the old cache."""
    cache = fake.root / 'var' / 'lib' / 'vllm-pd-lab' / 'npu-out'
    assert (cache / '12-ip').exists()
    (fake.root / 'npu.json').unlink()
    assert fake('init', '8', '172.28.10.32', '255.255.255.0')[0] == 0
    assert sorted({p.name.split('-')[0] for p in cache.iterdir()}, key=int) == [str(n) for n in range(8)]
    assert fake('hccn_tool', '-i', '12', '-ip', '-g')[0] == 4


def _fake_module(fake):
    import importlib.util
    spec = importlib.util.spec_from_file_location('npu_fake_boot', FAKE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.STATE, mod.ROOT = str(fake.root / 'npu.json'), str(fake.root)
    return mod


class FakeIp:
    """`ip` of a restarted lab host: podman gave back the NPU NIC's first address only."""

    def __init__(self, held):
        self.held, self.calls = held, []

    def __call__(self, *argv):
        self.calls.append(argv)
        out = ''.join('%d: %s    inet %s/24 brd x scope global %s\n' % (i, dev, a, dev)
                      for i, (dev, a) in enumerate(self.held))
        return subprocess.CompletedProcess(argv, 1 if argv[:2] == ('link', 'show') else 0, out, '')


def test_boot_restores_every_npu_address_from_hccn_conf(fake, capsys):
    """After a restart only NPU 0's address is on the NIC; boot adds the others as the driver does
    from hccn.conf, names the NIC npu0, and an hccn.conf address that differs wins (the NPU takes it)."""
    fake('set', '3', 'conf_ip', '172.28.10.99')
    mod = _fake_module(fake)
    ip = FakeIp([('data0', '192.168.109.31'), ('eth0', '172.28.10.32')])
    assert mod.boot(mod.load(), ip) == 0
    added = [c[2] for c in ip.calls if c[:2] == ('addr', 'add')]
    want = ['172.28.10.%d/24' % (33 + n) for n in range(15)]
    want[2] = '172.28.10.99/24'
    assert added == want and all(c[-1] == 'eth0' for c in ip.calls if c[:2] == ('addr', 'add'))
    assert ('link', 'property', 'add', 'dev', 'eth0', 'altname', 'npu0') in ip.calls
    capsys.readouterr()
    assert P.parse_ip(fake('hccn_tool', '-i', '3', '-ip', '-g')[1])['ipaddr'] == '172.28.10.99'
    assert P.parse_hccn_conf((fake.root / 'etc' / 'hccn.conf').read_text())[3]['address'] == '172.28.10.99'


def test_boot_without_the_npu_nic_fails_naming_the_fix(fake, capsys):
    mod = _fake_module(fake)
    assert mod.boot(mod.load(), FakeIp([('data0', '192.168.109.31')])) == 1
    assert 'npu-lab up' in capsys.readouterr().err
