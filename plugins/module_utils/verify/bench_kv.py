# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""KV transfer times per P->D pair, from the decode engines' log lines.

vllm-ascend's MooncakeConnectorV1 exports no metric for them; D (which pulls) logs, at INFO, one line
per transfer and rank, in the format of its release (releases.RELEASES kv_log):
``KV cache transfer for request %s took %.2f ms. local_ip %s local_device_id %s remote_session_id %s``
(0.23), ``... took %.2f ms (%d groups, %d blocks). local_ip ...`` (0.18 and older). local_ip is D's VLLM_HOST_IP,
remote_session_id is ``P_ADDRESS:TE_RPC_PORT``, so the pair is (the P host with that address, this D).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.prom_text import totals
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.loadgen import summary

# The table's facts this module reads, the same in every release it knows (tests/contract checks them against each
# release's vLLM and vllm-ascend): the counter of requests an engine finished, and the head of the KV transfer line.
_UP = runtime(None)
SUCCESS_COUNTER = _UP['metric_names']['request_success']

# anchored on "request <id> took": 0.23's "Skipping KV cache transfer for request. remote_request_id=..." is none
KV_LINE = re.compile(re.escape(_UP['kv_log_grep']) + r' (?P<request>\S+) took (?P<ms>[0-9]+(?:\.[0-9]+)?) ms'
                     r'(?: \((?P<groups>[0-9]+) groups, (?P<blocks>[0-9]+) blocks\))?\. '
                     r'local_ip (?P<local_ip>\S+) local_device_id (?P<device>\S+) '
                     r'remote_session_id (?P<session>\S+)')


def parse_line(line):
    """One transfer as a dict (request, ms, local_ip, device, remote_address, remote_port), or None."""
    m = KV_LINE.search(line)
    if not m:
        return None
    address, _sep, port = m.group('session').rpartition(':')
    return dict(request=m.group('request'), ms=float(m.group('ms')), local_ip=m.group('local_ip'),
                device=m.group('device'), remote_address=(address or m.group('session')).strip('[]'),
                remote_port=port if address else '')


def pair_times(decode_logs, prefill_by_address):
    """KV transfer summaries per P->D pair.

    decode_logs: [{"host": D host, "address": its VLLM_HOST_IP, "text": its log lines}];
    prefill_by_address: {P's VLLM_HOST_IP: P host}. An address no P of the cluster has is named as is.
    Returns a list sorted by (prefill, decode) of {"prefill", "prefill_address", "decode",
    "decode_address", "pair", "requests", "ms": summary, "samples": [ms, ...] in log order}.
    """
    pairs = {}
    for log in decode_logs:
        for line in (log.get('text') or '').splitlines():
            t = parse_line(line)
            if t is None:
                continue
            p_host = prefill_by_address.get(t['remote_address'], t['remote_address'])
            key = (p_host, log['host'])
            pair = pairs.setdefault(key, dict(
                prefill=p_host, prefill_address=t['remote_address'], decode=log['host'],
                decode_address=log.get('address') or t['local_ip'], samples=[], request_ids=set()))
            pair['samples'].append(t['ms'])
            pair['request_ids'].add(t['request'])
    out = []
    for key in sorted(pairs):
        p = pairs[key]
        ids = p.pop('request_ids')
        p.update(pair='%s -> %s' % key, requests=len(ids), ms=summary(p['samples']))
        out.append(p)
    return out


# Why a D can finish no request without a fault (example proxy, 0.18-0.23: its scheduler's heap key)
PROXY_PICKS = ('the example proxy gives each request to the decode instance with the fewest active tokens '
               '(ties to the first listed)')


def _without_transfer(decode_logs, pairs):
    seen = set(p['decode'] for p in pairs)
    return [log for log in decode_logs if log['host'] not in seen]


def unseen(decode_logs, pairs):
    """D hosts that logged no KV transfer at all although they may have served requests: a host whose
    ``served`` (requests its engines finished during the run, from vllm:request_success_total) is 0 is idle(),
    not silent; an unknown count (None or absent) counts as served."""
    return [log['host'] for log in _without_transfer(decode_logs, pairs) if log.get('served') != 0]


def idle(decode_logs, pairs):
    """D hosts that finished no request during the run, so had no KV to pull. Not a fault (PROXY_PICKS):
    requests sent one after another all reach the same D."""
    return [log['host'] for log in _without_transfer(decode_logs, pairs) if log.get('served') == 0]


def idle_note(hosts):
    """The run record's note naming the idle D hosts, or None."""
    if not hosts:
        return None
    return ('%s finished no request during the run, so its KV transfer was not measured: %s, so at low '
            'concurrency every request can reach one D; raise vllm_pd_bench_concurrency or the rate to load '
            'every D' % (', '.join(hosts), PROXY_PICKS))


def finished_requests(text):
    """vllm:request_success_total of one engine's /metrics TEXT, summed over its finished_reason series (not its
    _created twin); ValueError when a line of it is garbled (common/prom_text.py)."""
    return totals(text, (SUCCESS_COUNTER,))[SUCCESS_COUNTER]


def requests_served(before, after):
    """The requests a D host's engines finished between two reads of their /metrics (BEFORE and AFTER: one
    text per instance, in the same order, None when unread), from vllm:request_success_total summed over its
    finished_reason series. None (unknown) when a read failed or does not parse, the instances differ or a counter
    went back (an engine restarted in between)."""
    if not before or len(before) != len(after) or any(t is None for t in list(before) + list(after)):
        return None
    try:
        counts = [finished_requests(t) for t in before], [finished_requests(t) for t in after]
        if any(a < b for b, a in zip(*counts)):
            return None
        return int(sum(counts[1]) - sum(counts[0]))
    except (ValueError, OverflowError):
        return None  # a garbled counter line, or NaN: unknown
