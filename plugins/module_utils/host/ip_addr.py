# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's addresses from `ip -o addr show` and its NICs from /sys/class/net, as network facts.

The preflight reads both in the module run that reads the machine (pd_host_read) instead of
gathering the network facts (one more module run per host before any check can answer; issue 22).
parse_addresses() returns the part of `setup: gather_subset=network` that filter pd_host_address
reads: `interfaces` and, per NIC (`-` written `_`, as setup does), `ipv4` (the first primary
address), `ipv4_secondaries` and `ipv6` (with `scope`). An address with a label (`eth0:1`) belongs
to its NIC (`eth0`), the device vLLM, HCCL and Gloo bind.

parse_ip_addr() is the collection's one reader of `ip -o addr show`: the preflight's facts (parse_addresses,
module pd_host_read, from which VLLM_HOST_IP is resolved), the doctor's host addresses (pd_doctor) and the start
guard's refusal line all read it, so the deploy and the doctor see the same addresses. Each address is a record
{ifname, family, address, prefix, peer, scope, flags, label}: flags are the kernel's words (secondary, dynamic,
deprecated, tentative, dadfailed, ...); they are reported, and select nothing.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# "3: data0    inet 192.168.1.31/24 brd 192.168.1.255 scope global data0\       valid_lft ..."
_LINE = re.compile(r'^\d+:\s+(?P<nic>[^\s@]+)(?:@\S+)?\s+(?P<family>inet6?)\s+(?P<rest>.*)$')


# the words of an address line that take a value, and the flags `ip` prints (iproute2 ipaddress.c)
_KEYWORDS = ('brd', 'scope', 'peer', 'metric', 'proto', 'valid_lft', 'preferred_lft', 'anycast')
_FLAGS = ('secondary', 'temporary', 'primary', 'nodad', 'optimistic', 'dadfailed', 'homeaddress', 'home',
          'deprecated', 'tentative', 'permanent', 'dynamic', 'mngtmpaddr', 'noprefixroute', 'autojoin',
          'stable-privacy')


class AddressReadError(ValueError):
    """The address listing is not `ip -o addr show` output (ip missing or failed)."""

    def fix(self, hostname):
        """What the operator reads: the host, what `ip` printed and the fix."""
        return ("cannot read the addresses of host %s: `ip -o addr show` printed %r. Fix: install iproute2 (the `ip` "
                "command) on %s; the preflight reads the host's addresses with it" % (hostname, str(self), hostname))


def _address(words):
    """(address, prefix, peer) of the words after inet/inet6: 'A/P ...' or 'A peer B/P ...' (point to point)."""
    first = words[0]
    host_prefix = '32' if ':' not in first else '128'
    if len(words) > 2 and words[1] == 'peer':
        peer, _sep, prefix = words[2].partition('/')
        return first.split('/', 1)[0], prefix or host_prefix, peer
    if '/' in first:
        addr, prefix = first.split('/', 1)
        return addr, prefix, None
    return first, host_prefix, None


def _records(text):
    """(the address records of TEXT, its lines that are no address line)."""
    records, other = [], []
    for line in (text or '').splitlines():
        m = _LINE.match(line.strip())
        if not m:
            if line.strip():
                other.append(line.strip())
            continue
        words = m.group('rest').split('\\', 1)[0].split()
        if not words:
            continue
        addr, prefix, peer = _address(words)
        family = m.group('family')
        scope = words[words.index('scope') + 1] if 'scope' in words[:-1] else 'global'
        last = words[-1]
        label = last if (family == 'inet' and len(words) > 1 and last not in _FLAGS and last not in _KEYWORDS
                         and words[-2] not in _KEYWORDS) else None
        records.append(dict(ifname=m.group('nic'), family=family, address=addr, prefix=int(prefix), peer=peer,
                            scope=scope, flags=[w for w in words[1:] if w in _FLAGS], label=label))
    return records, other


def parse_ip_addr(text):
    """`ip -o addr show` TEXT -> [{ifname, family (inet, inet6), address, prefix (int), peer (point to point, else
    None), scope, flags, label (an IPv4 address's label, eth0:1; None for IPv6)}], in the order of the text."""
    return _records(text)[0]


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
    records, other = _records(addr_text)
    if not records and other:
        raise AddressReadError(' '.join(other)[:300])
    for r in records:
        entry = nic(r['ifname'])
        prefix = str(r['prefix'])
        if r['family'] == 'inet6':
            entry.setdefault('ipv6', []).append(dict(address=r['address'], prefix=prefix, scope=r['scope']))
        elif 'secondary' in r['flags'] or 'ipv4' in entry:
            entry.setdefault('ipv4_secondaries', []).append(dict(address=r['address'], prefix=prefix))
        else:
            entry['ipv4'] = dict(address=r['address'], prefix=prefix)
    return facts
