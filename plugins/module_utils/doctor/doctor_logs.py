# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Log signatures of KV-transfer failures, and which one caused the others.

A failed transfer leaves a chain in the logs: the first line names the cause ("'device ip' is not
set correctly", a bind error, a config conflict), the later ones are what followed (transfer
failures, force-freed requests, a traceback's last exception). The doctor reports the earliest
signature as the cause (by the journal timestamp, then the line order), not the last exception.
Texts are vllm-ascend's, Mooncake's and CANN's own (field-failures.md, vllm-ascend-facts.md).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re
from datetime import datetime, timedelta, timezone

BOTH = ('prefill', 'decode')
# (check, text, severity, kinds that log it)
SIGNATURES = (
    ('LogKvThreadFailed', 'KV Cache sending/receiving thread failed to start.', 'critical', BOTH),
    ('LogBindFailed', 'Address already in use', 'critical', BOTH),
    ('LogBindFailed', 'Cannot assign requested address', 'critical', BOTH),
    # the NPU has no address as the engine sees /etc/hccn.conf (vllm-ascend #7711)
    ('LogDeviceIpUnset', "'device ip' is not set", 'critical', BOTH),
    # kv_connector_extra_config of P and D disagree (vllm-ascend #8345)
    ('LogConfigConflict', 'config has a conflicting data parallel size', 'critical', BOTH),
    # driver and CANN do not belong together (vllm-ascend #2406)
    ('LogVersionMismatch', 'does not support hrtRaAiQpCreate', 'critical', BOTH),
    # another process holds the NPU memory (vllm-ascend #14628)
    ('LogNpuMemoryTaken', 'less than desired GPU memory utilization', 'critical', BOTH),
    # Mooncake ADXL could not reach the peer's advertised address (vllm-ascend #5635)
    ('LogConnectFailed', 'Failed to connect to target', 'error', BOTH),
    # ASCEND_TRANSFER_TIMEOUT ran out (vllm-ascend #7846)
    ('LogTransferTimeout', 'Sync batch data transfer timeout', 'error', ('decode',)),
    ('LogTransferFailed', 'Failed to transfer KV cache for request', 'error', ('decode',)),
    ('LogTransferFailed', 'Mooncake transfer failed', 'error', ('decode',)),
    # speculative decoding on P only (vllm-ascend #16177)
    ('LogSpecDecodeIndex', 'IndexError: list index out of range', 'error', ('decode',)),
    ('LogForceFreed', 'Force freed expired request:', 'error', ('prefill',)),
    ('LogForceFreed', 'Force freed request:', 'error', ('prefill',)),  # 0.18.0, 0.13.0, 0.11.0 (releases.py)
)

FIX = dict(
    LogKvThreadFailed='a KV side-channel port could not be bound: see steps 1 and 2 (VLLM_HOST_IP, port group)',
    LogBindFailed='the bind failed: a port of the group is taken (step 2) or VLLM_HOST_IP is not local (step 1)',
    LogDeviceIpUnset='the engine sees no NPU address: configure address_N in /etc/hccn.conf and mount it (and '
                     'hccn_tool) into the engine container, then restart the engine',
    LogConfigConflict='P and D launch with different kv_connector_extra_config (tp/dp per side): deploy both '
                      'from one inventory (the preflight checks they fit) and restart them',
    LogVersionMismatch='the NPU driver and CANN do not belong together: install the CANN of the driver',
    LogNpuMemoryTaken='another process uses the NPU memory: stop it (npu-smi info) or give the engine other NPUs',
    LogConnectFailed='Mooncake cannot reach the peer it was given: check the advertised address (VLLM_HOST_IP), '
                     'the NPU network (hccn_tool -ping) and that CANN is the one of the release (CannIncompatible)',
    LogTransferTimeout='the RDMA read did not finish within ASCEND_TRANSFER_TIMEOUT: check the NPU links, and '
                       'keep ASCEND_TRANSFER_TIMEOUT above 4.096 us * 2^HCCL_RDMA_TIMEOUT * HCCL_RDMA_RETRY_CNT',
    LogTransferFailed='D could not pull the KV blocks from P: see the reachability and port-group findings',
    LogSpecDecodeIndex='D fails on speculative tokens it did not expect: enable speculative decoding on both '
                       'sides (vllm_pd_speculative_config) or on neither',
    LogForceFreed='D never pulled the KV cache of these requests in time: D cannot reach P (advertised address, '
                  'port group) or D is down',
)
CHECKS = tuple(dict.fromkeys(s[0] for s in SIGNATURES))

# journalctl -o short-iso: 2026-12-02T14:03:04+0000 (short-iso-precise adds .ffffff)
_STAMP = re.compile(r'^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?([+-])(\d\d):?(\d\d)\s')


def line_time(line):
    """UTC seconds of a short-iso journal line, or None when the line has no such timestamp."""
    m = _STAMP.match(line or '')
    if not m:
        return None
    sign = 1 if m.group(8) == '+' else -1
    try:
        tz = timezone(sign * timedelta(hours=int(m.group(9)), minutes=int(m.group(10))))
        stamp = datetime(*(int(m.group(i)) for i in range(1, 7)), tzinfo=tz)
    except ValueError:  # month 13, hour 25, an offset of a day or more
        return None
    return stamp.timestamp() + float(m.group(7) or 0)


def scan(lines, kind, keep=3, signatures=SIGNATURES):
    """Signatures of this kind of engine in LINES, in SIGNATURES order.

    Each: check, text, severity, count, lines (the last KEEP matching), first (the first matching
    line), first_index (its position in LINES) and first_time (line_time of it).
    """
    found = {}
    for index, line in enumerate(lines or []):
        for check, text, severity, kinds in signatures:
            if kind in kinds and text in line:
                f = found.get((check, text))
                if f is None:
                    f = found[(check, text)] = dict(check=check, text=text, severity=severity, count=0, lines=[],
                                                    first=line.rstrip(), first_index=index, first_time=line_time(line))
                f['count'] += 1
                f['lines'] = (f['lines'] + [line.rstrip()])[-keep:]
    return [found[(c, t)] for c, t, _s, _k in signatures if (c, t) in found]


def _when(f):
    # a line without a timestamp sorts after the timed ones; within one log the line order decides
    t = f.get('first_time')
    return (t is None, t if t is not None else 0.0, f.get('first_index', 0))


def earliest_first(findings):
    """FINDINGS (already ordered) with the log findings (those carrying 'first_time'/'first_index')
    put in the order they first appeared, in the places the log findings held: the earliest signature
    takes the first of those places, so it becomes the cause if no earlier step failed."""
    places = [i for i, f in enumerate(findings) if 'first_index' in f]
    logs = sorted((findings[i] for i in places), key=_when)
    out = list(findings)
    for i, f in zip(places, logs):
        out[i] = f
    return out
