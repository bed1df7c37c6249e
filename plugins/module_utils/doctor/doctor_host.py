# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What pd_doctor reads on a host, as pure parsers: process environment, `ip` link and route output,
engine log lines. Text in, data out; no I/O here. Env files are read by common/env_file.py and `ip -o addr`
by host/ip_addr.py, the readers the deploy uses.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_logs
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_windows import WINDOW_ENV
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime

# The variables vLLM-Ascend and HCCL read to pick the inter-node address and NIC [facts §1], and those that
# move the reserved port windows (port_windows.WINDOW_ENV). The table's host_ip_env and engine_env_names, the
# same in every release it knows.
_UP = runtime(None)
_NAMES = _UP['engine_env_names']
NET_ENV = (_UP['host_ip_env'], _NAMES['hccl_if_ip'], _NAMES['gloo_socket_ifname'], _NAMES['tp_socket_ifname'],
           _NAMES['hccl_socket_ifname'], 'HOST_IP') + WINDOW_ENV

# Engine log lines that point at a KV transfer problem (exact vLLM-Ascend text, docs/design.md):
# (check, text, severity, kinds that log it), in doctor_logs.
LOG_HINTS = doctor_logs.SIGNATURES
LOG_EVIDENCE = 3


def parse_environ(raw):
    """/proc/PID/environ bytes -> {name: value}."""
    env = {}
    for item in (raw or b'').split(b'\0'):
        if b'=' not in item:
            continue
        k, v = item.split(b'=', 1)
        env[k.decode('utf-8', 'replace')] = v.decode('utf-8', 'replace')
    return env


def net_env(env):
    """The address-related subset of an environment; absent variables are left out."""
    return dict((k, env[k]) for k in NET_ENV if k in (env or {}))


def parse_link_mtu(text):
    """`ip -o link show` -> {ifname: mtu}."""
    out = {}
    for line in (text or '').splitlines():
        m = re.match(r'^\d+:\s+(\S+?)(?:@\S+)?:\s.*\bmtu\s+(\d+)', line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def parse_route_get(text):
    """`ip -o route get ADDR` -> {type, dev, src, via, mtu}; type is unicast, local, or the route type
    (unreachable, prohibit, blackhole) the kernel printed first."""
    line = ' '.join((text or '').split())
    res = dict(type=None, dev=None, src=None, via=None, mtu=None)
    if not line:
        return res
    words = line.split()
    res['type'] = words[0] if words[0] in ('local', 'unreachable', 'prohibit', 'blackhole', 'broadcast',
                                           'multicast', 'throw') else 'unicast'
    for key, field in (('dev', 'dev'), ('src', 'src'), ('via', 'via')):
        m = re.search(r'\b%s\s+(\S+)' % key, line)
        if m:
            res[field] = m.group(1)
    m = re.search(r'\bmtu\s+(?:lock\s+)?(\d+)', line)
    if m:
        res['mtu'] = int(m.group(1))
    return res


def parse_default_route(text):
    """`ip -o route show default` -> dev of the first default route (what vLLM's auto-detection
    picks [facts §1]), or None."""
    for line in (text or '').splitlines():
        m = re.search(r'\bdev\s+(\S+)', line)
        if line.startswith('default') and m:
            return m.group(1)
    return None


def addresses_of(addrs, ifname, family='inet'):
    return [a['address'] for a in addrs if a['ifname'] == ifname and a['family'] == family]


def scan_log(lines, kind, hints=LOG_HINTS, keep=LOG_EVIDENCE):
    """Match engine log lines against the hints of this kind of engine.

    Returns [{check, text, severity, count, lines, first, first_index, first_time}] in the order of
    hints; lines are the last `keep` matching lines (with the timestamp journalctl printed), first the
    first one (doctor_logs.scan).
    """
    return doctor_logs.scan(lines, kind, keep, hints)


def _tree(root, pids, parents):
    """root and those of pids that descend from it."""
    out = set([root])
    for pid in pids:
        seen = set()
        p = pid
        while p and p not in seen:
            if p == root:
                out.add(pid)
                break
            seen.add(p)
            p = parents.get(p)
    return out


def unit_pids(unit, pid_units, main_pid, parents):
    """Pids of the engine: those whose cgroup names the unit, plus MainPID and its descendants.

    pid_units: {pid: unit or None}; parents: {pid: ppid}.
    """
    pids = set(p for p, u in pid_units.items() if u == unit)
    if main_pid:
        pids |= _tree(main_pid, pid_units, parents)
    return sorted(pids)


def container_pids(container_id, pid_containers, init_pid, parents):
    """Pids of an engine container: those whose cgroup names the container, plus its init pid and
    descendants (under podman/docker they are children of conmon/containerd-shim, not of the unit).

    pid_containers: {pid: container id or None}; parents: {pid: ppid}.
    """
    pids = set(p for p, c in pid_containers.items() if container_id and c == container_id)
    if init_pid:
        pids |= _tree(init_pid, pid_containers, parents)
    return sorted(pids)
