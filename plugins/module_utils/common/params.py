# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parameter checks shared by the modules: each bad value becomes a ParamError naming the parameter
and the fix, never a ValueError/TypeError/OverflowError/struct.error deep inside a read or a probe."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import math
import re
import socket

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.port_formula import group_bounds

MAX_PORT = 65535
# longest wait a module accepts (a day); a bigger number is a typo, and socket timeouts overflow near 2**63 ns
MAX_TIMEOUT = 86400
# systemd's unit name characters (systemd.unit(5)); never starting with '-' (an option to systemctl)
_UNIT_NAME = re.compile(r'^[A-Za-z0-9:_.\\@][A-Za-z0-9:_.\\@-]*$')
# podman's and docker's rule for container names
CONTAINER_NAME = re.compile(r'^[a-zA-Z0-9][a-zA-Z0-9_.-]*$')


class ParamError(ValueError):
    """A parameter value the module refuses; str() is the whole message (parameter, value, fix)."""

    def __init__(self, name, value, fix):
        self.name = name
        ValueError.__init__(self, '%s=%r is invalid: %s' % (name, value, fix))


def whole_number(value):
    """A whole number written as an int or digits; None for anything else (bool, 'abc', 1.5, -3, '+3', ' 3'): how
    the inventory check and the proxy tier read a port or a count from the inventory."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and re.match(r'^[0-9]+$', value):
        return int(value)
    return None


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def as_int(name, value, lo=None, hi=None, fix=None):
    """value as an int within [lo, hi]; strings of digits are accepted (module args arrive as text)."""
    if isinstance(value, str) and re.match(r'^\s*[+-]?\d+\s*$', value):
        value = int(value)
    if not _is_int(value):
        raise ParamError(name, value, fix or 'give a whole number')
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if lo is not None and hi is not None:
            rng = 'between %d and %d' % (lo, hi)
        else:
            rng = '>= %d' % lo if lo is not None else '<= %d' % hi
        raise ParamError(name, value, fix or 'it must be %s' % rng)
    return value


def port(name, value, fix=None):
    return as_int(name, value, 1, MAX_PORT, fix or 'a TCP port is a whole number between 1 and 65535')


def timeout(name, value, allow_zero=False):
    """A finite number of seconds, > 0 (>= 0 when allow_zero), at most MAX_TIMEOUT."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ParamError(name, value, 'give a number of seconds')
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParamError(name, value, 'give a number of seconds')
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise ParamError(name, value, 'give a finite number of seconds')
    if value < 0 or (value == 0 and not allow_zero) or value > MAX_TIMEOUT:
        raise ParamError(name, value, 'give a number of seconds %s 0 and at most %d' % (
            '>=' if allow_zero else '>', MAX_TIMEOUT))
    return value


def ip_address(name, value, fix):
    """The literal IPv4/IPv6 address (brackets and zone index kept out), else ParamError."""
    text = value if isinstance(value, str) else None
    if text is None or not text.strip() or any(ord(c) < 32 for c in text):
        raise ParamError(name, value, fix)
    norm = text.strip()
    if norm.startswith('[') and norm.endswith(']'):
        norm = norm[1:-1]
    try:
        socket.inet_pton(socket.AF_INET6 if ':' in norm else socket.AF_INET, norm)
    except (socket.error, ValueError, OSError):
        raise ParamError(name, value, fix)
    return norm


def unit_name(name, value):
    if not isinstance(value, str) or not _UNIT_NAME.match(value.strip()):
        raise ParamError(name, value, 'a systemd unit name has only letters, digits and ":_.\\@-" and does not '
                                      'start with "-" (for example grafana-server.service)')
    return value.strip()


def container_name(name, value):
    if not isinstance(value, str) or not CONTAINER_NAME.match(value):
        raise ParamError(name, value, 'a container name or id has only letters, digits, "_", "." and "-"')
    return value


def port_range(name, value):
    """[first, last] -> (first, last); [] -> None (check switched off); reversed or bad -> ParamError."""
    if not value:
        return None
    if len(value) != 2:
        raise ParamError(name, value, 'give [first, last] (two ports) or [] to switch the check off')
    first = port('%s[0]' % name, value[0])
    last = port('%s[1]' % name, value[1])
    if last < first:
        raise ParamError(name, value, 'the first port must not be greater than the last; write [%d, %d]' % (
            last, first))
    return first, last


def group_sizes(kv_port, tp_size=1, pp_size=1, pcp_size=1, dp_rank_start=0, dp_size_local=1, prefix='',
                dp_size_name='dp_size_local'):
    """Checks the inputs of port_group; the whole group must lie in 1..65535. Returns nothing."""
    kv_port = port(prefix + 'kv_port', kv_port)
    sizes = [as_int(prefix + key, value, 1, MAX_PORT, 'invalid parallel sizes: %s must be >= 1 (and the whole '
                    'group must end at or below port 65535)' % key)
             for key, value in (('tp_size', tp_size), ('pp_size', pp_size), ('pcp_size', pcp_size))]
    dp_rank_start = as_int(prefix + 'dp_rank_start', dp_rank_start, 0, MAX_PORT,
                           'invalid parallel sizes: dp_rank_start must be >= 0 (and the group must end at or '
                           'below port 65535)')
    dp_size_local = as_int(prefix + dp_size_name, dp_size_local, 1, MAX_PORT,
                           'invalid parallel sizes: %s must be >= 1 (and the group must end at or below port '
                           '65535)' % dp_size_name)
    # the last port by the one formula (common/port_formula.py), without building the list
    end = group_bounds(kv_port, sizes[0], sizes[1], sizes[2], dp_rank_start, dp_size_local).last
    if end > MAX_PORT:
        best = MAX_PORT - (end - kv_port)
        fix = 'pick kv_port <= %d' % best if best >= 1024 else 'use smaller tp/pp/pcp/dp sizes'
        raise ParamError(prefix + 'kv_port', kv_port, 'the group (kv_port + dp_rank * tp*pp*pcp + device index) '
                         'would run to port %d, past 65535; %s' % (end, fix))


def kv_port_group_params(p):
    """kv_port_group: every parameter checked before anything is read or changed -> host_ip (normalised)."""
    group_sizes(p['kv_port'], p['tp_size'], p['pp_size'], p['pcp_size'], p['dp_rank_start'], p['dp_size_local'])
    if p['owner_pid'] is not None:
        as_int('owner_pid', p['owner_pid'], 1, None, 'a pid is >= 1')
    if p['ascend_base_port'] is not None:
        port('ascend_base_port', p['ascend_base_port'])
    timeout('timeout', p['timeout'], allow_zero=True)
    timeout('probe_timeout', p['probe_timeout'])
    for key in ('owner_unit',):
        if p[key]:
            unit_name(key, p[key])
    if p['owner_container']:
        container_name('owner_container', p['owner_container'])
    for i, item in enumerate(p['stop_services']):
        if item and not item.strip().startswith('container:'):
            unit_name('stop_services[%d]' % i, item)
    fix = 'it is not an IP address; VLLM_HOST_IP must be the literal inter-node IP of the host'
    host_ip = ip_address('host_ip', p['host_ip'], fix) if p['host_ip'] is not None else None
    if p['remote_host'] is not None:
        ip_address('remote_host', p['remote_host'], 'give the prefill host\'s VLLM_HOST_IP (an IP address)')
    return host_ip
