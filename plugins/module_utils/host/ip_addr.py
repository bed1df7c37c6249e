# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's addresses from `ip -o addr show` and its NICs from /sys/class/net, as network facts.

The preflight reads both in the command that reads the machine (one module run) instead of
gathering the network facts (one more module run per host before any check can answer; issue 22).
parse_addresses() returns the part of `setup: gather_subset=network` that filter pd_host_address
reads: `interfaces` and, per NIC (`-` written `_`, as setup does), `ipv4` (the first primary
address), `ipv4_secondaries` and `ipv6` (with `scope`). An address with a label (`eth0:1`) belongs
to its NIC (`eth0`), the device vLLM, HCCL and Gloo bind.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# "3: data0    inet 192.168.1.31/24 brd 192.168.1.255 scope global data0\       valid_lft ..."
_LINE = re.compile(r'^\d+:\s+(?P<nic>[^\s@]+)(?:@\S+)?\s+(?P<family>inet6?)\s+(?P<rest>.*)$')


class AddressReadError(ValueError):
    """The address listing is not `ip -o addr show` output (ip missing or failed)."""


def _address(words):
    """(address, prefix) of the words after inet/inet6: 'A/P ...' or 'A peer B/P ...' (point to point)."""
    first = words[0]
    if '/' in first:
        addr, prefix = first.split('/', 1)
        return addr, prefix
    if len(words) > 2 and words[1] == 'peer':
        return first, words[2].split('/', 1)[1] if '/' in words[2] else ('32' if ':' not in first else '128')
    return first, '32' if ':' not in first else '128'


def parse_addresses(addr_text, nic_names=()):
    """Network facts (see the module doc) of `ip -o addr show` text and the names in /sys/class/net.

    Raises AddressReadError when a non-empty text has no address line (the command's error text).
    """
    facts = dict(interfaces=[])

    def nic(name):
        if name not in facts['interfaces']:
            facts['interfaces'].append(name)
        return facts.setdefault(name.replace('-', '_'), {})

    for name in nic_names:
        if name.strip():
            nic(name.strip())
    parsed = 0
    other = []
    for line in (addr_text or '').splitlines():
        m = _LINE.match(line.strip())
        if not m:
            if line.strip():
                other.append(line.strip())
            continue
        parsed += 1
        words = m.group('rest').split('\\', 1)[0].split()
        if not words:
            continue
        addr, prefix = _address(words)
        entry = nic(m.group('nic'))
        scope = words[words.index('scope') + 1] if 'scope' in words[:-1] else 'global'
        if m.group('family') == 'inet6':
            entry.setdefault('ipv6', []).append(dict(address=addr, prefix=prefix, scope=scope))
        elif 'secondary' in words or 'ipv4' in entry:
            entry.setdefault('ipv4_secondaries', []).append(dict(address=addr, prefix=prefix))
        else:
            entry['ipv4'] = dict(address=addr, prefix=prefix)
    if not parsed and other:
        raise AddressReadError(' '.join(other)[:300])
    return facts
