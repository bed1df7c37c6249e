# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers of the Ascend NPU tools' output and files (shared/docs/ascend-node-facts.md §1-§4).

Pure functions: text in, plain data out; None (or an empty result) when the text is not the
tool's format, so a caller can tell "unhealthy" from "unreadable".
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

HCCN_TOOL = '/usr/local/Ascend/driver/tools/hccn_tool'
HCCN_CONF = '/etc/hccn.conf'
DRIVER_VERSION_INFO = '/usr/local/Ascend/driver/version.info'
TOOLKIT_DIR = '/usr/local/Ascend/ascend-toolkit/latest'
# hccn_tool exit codes [facts §1]: internal error code & 0xFF.
HCCN_EXIT = {1: 'Command execute failed', 2: 'no gateway preset', 4: 'invalid or missing device id',
             11: 'hccn_tool busy', 13: 'no IP preset', 22: 'link down'}
NPU_HEALTH = ('OK', 'Warning', 'Alarm', 'Critical', 'UNKNOWN')


def parse_link(text):
    """`hccn_tool -i N -link -g`: 'link status: UP' -> 'UP' (DOWN still exits 0)."""
    m = re.search(r'^\s*link status:\s*(\S+)', text or '', re.M)
    return m.group(1).upper() if m else None


def parse_net_health(text):
    """`-net_health -g`: 'net health status: Success' -> 'Success' (may contain spaces: 'Socket fail')."""
    m = re.search(r'^\s*net health status:\s*(.+?)\s*$', text or '', re.M)
    return m.group(1) if m else None


def parse_ip(text):
    """`-ip -g`: 'ipaddr:A' / 'netmask:M' lines (no space after the colon) -> {'ipaddr', 'netmask'}."""
    out = {}
    for key in ('ipaddr', 'netmask'):
        m = re.search(r'^\s*%s:\s*(\S+)' % key, text or '', re.M)
        if m:
            out[key] = m.group(1)
    return out if 'ipaddr' in out else None


def parse_tls(text):
    """`-tls -g`: 'dev_id:0, tls switch[0](0:disable, 1:enable), ...' -> 0 or 1."""
    m = re.search(r'tls switch\[(\d+)\]', text or '')
    return int(m.group(1)) if m else None


def parse_ping(text):
    """`-ping -g address X`: {'peer', 'sent', 'received', 'loss' (percent), 'timeouts'} or None."""
    text = text or ''
    m = re.search(r'(\d+) packets transmitted, (\d+) received, ([\d.]+)% packets? loss', text)
    if not m:
        return None
    peer = re.search(r'^device \d+ PING (\S+)', text, re.M)
    return dict(peer=peer.group(1) if peer else None, sent=int(m.group(1)), received=int(m.group(2)),
                loss=float(m.group(3)), timeouts=len(re.findall(r'recv time out seq', text)),
                unreachable='Destination Host Unreachable' in text)


def parse_key_values(text):
    """key=value lines (hccn.conf, version.info, *_install.info); later keys win, comments skipped."""
    out = {}
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line.startswith('#') or '=' not in line:
            continue
        k, v = line.split('=', 1)
        out[k.strip()] = v.strip()
    return out


def parse_hccn_conf(text):
    """/etc/hccn.conf `<key>_<phyid>=<value>` -> {phyid: {key: value}} [facts §2]."""
    out = {}
    for k, v in parse_key_values(text).items():
        m = re.match(r'^([a-z_]+)_(\d+)$', k)
        if m:
            out.setdefault(int(m.group(2)), {})[m.group(1)] = v
    return out


def npu_peers(decode_hosts):
    """[{host, npu, address}] of every NPU of the decode instances of DECODE_HOSTS ([(host, /etc/hccn.conf text,
    decode instances)], the D hosts of a P host's cluster) to which that host's hccn.conf gives an address: the
    peers P pings (npu_readiness), in the preflight and the doctor alike."""
    out = []
    for host, hccn_text, instances in decode_hosts:
        conf = parse_hccn_conf(hccn_text or '')
        for instance in instances or []:
            for device in instance.get('devices') or []:
                address = conf.get(int(device), {}).get('address')
                if address is not None:
                    out.append({'host': host, 'npu': int(device), 'address': address})
    return out


def driver_version(text):
    """version.info: package_version, else Version [facts §4]."""
    kv = parse_key_values(text)
    return kv.get('package_version') or kv.get('Version')


def cann_version(install_info=None, version_cfg=None):
    """CANN from ascend_toolkit_install.info (version=) or version.cfg (runtime_running_version=[X:CANN])."""
    kv = parse_key_values(install_info)
    if kv.get('version'):
        return kv['version']
    m = re.search(r'runtime_running_version=\[[^:\]]*:([^\]]+)\]', version_cfg or '')
    return m.group(1).strip() if m else None


def _cells(line):
    return [c.strip() for c in line.strip().strip('|').split('|')]


def parse_npu_smi_info(text):
    """`npu-smi info` (A2 or A3 layout, any column widths: split on '|') [facts §3].

    -> {'version', 'a3', 'chips': {phy_id: {'npu', 'chip', 'health', 'name'}},
        'processes': [{'npu', 'chip', 'phy_id', 'pid', 'name', 'memory_mb'}]} or None.
    A2: the chip row's id is the chip (0) and the physical id is the NPU id. A3: the chip row is
    'Chip  Phy-ID' and names the physical id; a process row names NPU id and chip, mapped through
    the chip rows.
    """
    text = text or ''
    m = re.search(r'npu-smi\s+(\S+)', text)
    if not m:
        return None
    out = dict(version=m.group(1), a3=bool(re.search(r'\|\s*Chip\s+Phy-ID', text)), chips={}, processes=[])
    section, npu, health, name = 'chips', None, None, None
    by_npu_chip = {}
    for line in text.splitlines():
        if not line.startswith('|'):
            continue
        cells = _cells(line)
        if re.match(r'NPU\s+Chip', cells[0]) and len(cells) >= 3 and 'Process' in cells[1]:
            section = 'processes'
            continue
        if section == 'chips':
            first = cells[0].split()
            if len(cells) < 3 or not first or not first[0].isdigit():
                continue
            if len(first) >= 2 and not first[1].isdigit():      # NPU row: 'id  Name' | Health
                npu, name, health = int(first[0]), first[1], cells[1]
                continue
            if npu is None:
                continue
            chip = int(first[0])
            phy = int(first[1]) if out['a3'] and len(first) >= 2 else npu
            out['chips'][phy] = dict(npu=npu, chip=chip, health=health, name=name)
            by_npu_chip[(npu, chip)] = phy
        else:
            if cells[0].startswith('No running processes'):
                continue
            first = cells[0].split()
            if len(cells) < 4 or len(first) < 2 or not first[0].isdigit() or not cells[1].isdigit():
                continue
            n, c = int(first[0]), int(first[1])
            try:
                mem = int(cells[3])
            except ValueError:
                mem = None
            out['processes'].append(dict(npu=n, chip=c, phy_id=by_npu_chip.get((n, c), n), pid=int(cells[1]),
                                         name=cells[2], memory_mb=mem))
    return out


def parse_mountinfo_size(text, mountpoint='/dev/shm'):
    """Size in bytes of a tmpfs from /proc/self/mountinfo (size=NNNk option), or None."""
    for line in (text or '').splitlines():
        parts = line.split()
        if len(parts) > 4 and parts[4] == mountpoint:
            m = re.search(r'size=(\d+)([kmg]?)', line)
            if m:
                return int(m.group(1)) * {'': 1, 'k': 1024, 'm': 1024 ** 2, 'g': 1024 ** 3}[m.group(2)]
    return None


def parse_size(text):
    """'64m', '16g', '1073741824', '512k' (docker/podman --shm-size units) -> bytes, or None."""
    m = re.match(r'^\s*(\d+)\s*([bkmg]?)b?\s*$', str(text or '').lower())
    if not m:
        return None
    return int(m.group(1)) * {'': 1, 'b': 1, 'k': 1024, 'm': 1024 ** 2, 'g': 1024 ** 3}[m.group(2)]


def run_option_values(argv, name):
    """Values of a `--name=V` / `--name V` option in a container run argv (every occurrence)."""
    out, i = [], 0
    argv = [str(a) for a in argv or []]
    while i < len(argv):
        a = argv[i]
        if a.startswith(name + '='):
            out.append(a[len(name) + 1:])
        elif a == name and i + 1 < len(argv):
            out.append(argv[i + 1])
            i += 1
        i += 1
    return out


def memlock_unlimited(argv):
    """True when a run argv sets `--ulimit memlock=-1[:-1]` (or 'unlimited')."""
    for v in run_option_values(argv, '--ulimit'):
        k, _sep, lim = v.partition('=')
        if k == 'memlock':
            return all(x in ('-1', 'unlimited') for x in lim.split(':'))
    return False


def mounted_paths(argv):
    """Container paths of `--volume/-v SRC:DST[:opts]` and `--mount type=bind,...,target=DST`."""
    out = []
    for v in run_option_values(argv, '--volume') + run_option_values(argv, '-v'):
        parts = v.split(':')
        if len(parts) >= 2:
            out.append(parts[1])
    for v in run_option_values(argv, '--mount'):
        kv = dict(p.split('=', 1) for p in v.split(',') if '=' in p)
        dst = kv.get('target') or kv.get('dst') or kv.get('destination')
        if dst:
            out.append(dst)
    return out
