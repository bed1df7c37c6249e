# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the doctor's page shows besides the findings, from what the hosts already give: each instance's
port group and listening state, the proxy's members vs the inventory, the KV transfer time per P->D pair
(D's journal lines over a recent window, parsed by the benchmark's bench_kv) and the latency distributions
the engines expose on /metrics (doctor_metrics). observe() adds them to the diagnosis' clusters (so the JSON
has them); sections() draws them with the benchmark page's charts (verify/report_svg).

Every value shown carries data-cluster and data-key, the path to it in the cluster's JSON record (list
items by index, e.g. ``kv_transfer.0.ms.p99`` or ``latency.1.ttft_ms.p50``), written with display().
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from html import escape

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_metrics import LATENCIES, latencies
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_checks import describe_holder
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import span
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.bench_kv import (
    PROXY_PICKS, finished_requests, pair_times, unseen)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.bench_vllm import KEYS
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.report_svg import buckets_svg, kv_svg, number
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.proxy_members import ROLES

PORT_STATES = ('listening', 'held by another process', 'on another address', 'closed')
STATE_CLASS = {'listening': 'ok', 'held by another process': 'bad', 'on another address': 'bad', 'closed': 'bad'}


def port_states(group):
    """Per port of a kv_port group (pd_doctor inspect's 'group'): {port, state, detail} in port order."""
    by_port = {}
    for key, state in (('ok', 'listening'), ('wrong_address', 'on another address'),
                       ('foreign', 'held by another process'), ('blocking', 'held by another process')):
        for h in group.get(key) or []:
            entry = by_port.setdefault(h['port'], dict(state=state, detail=[]))
            # a foreign holder outranks the engine's own listener: vLLM cannot bind that port
            if PORT_STATES.index(state) > PORT_STATES.index(entry['state']):
                entry['state'] = state
            entry['detail'].append(describe_holder(h))
    out = []
    for port in group.get('ports') or []:
        entry = by_port.get(port, dict(state='closed', detail=['no listener on %s:%d' % (group.get('address'), port)]))
        out.append(dict(port=port, state=entry['state'], detail='; '.join(entry['detail'])))
    return out


def _instances(names, hosts):
    out = []
    for name in names:
        for eng in (hosts[name].get('inspect') or {}).get('engines') or []:
            g = eng.get('group')
            out.append(dict(host=name, kind=eng['kind'], unit=eng['unit'], active=bool(eng.get('active')),
                            state=(eng.get('state') or {}).get('ActiveState'), pid=eng.get('pid'),
                            api_listening=eng.get('api_listening'),
                            group=span(g['ports']) if g else None, group_address=g['address'] if g else None,
                            ports=port_states(g) if g else []))
    return out


def _kv(names, hosts):
    logs, prefill = [], {}
    for name in names:
        h = hosts[name]
        if 'prefill' in (h.get('groups') or []):
            for eng in (h.get('inspect') or {}).get('engines') or []:
                if (eng.get('advertised') or {}).get('address'):
                    prefill[eng['advertised']['address']] = name
            if (h.get('address') or {}).get('address'):
                prefill.setdefault(h['address']['address'], name)
        kv = h.get('kv_log')
        if 'decode' in (h.get('groups') or []) and kv is not None:
            logs.append(dict(host=name, address=(h.get('address') or {}).get('address'), text=kv.get('text') or '',
                             error=kv.get('error')))
    pairs = pair_times(logs, prefill)
    return pairs, [dict(host=log['host'], error=log['error'], finished=_finished_since_start(hosts[log['host']]))
                   for log in logs if log['host'] in unseen(logs, pairs) or log['error']]


def _finished_since_start(host):
    """The requests the host's decode engines finished since they started, or None when a /metrics was not read."""
    reads = [m for m in host.get('metrics') or [] if m.get('kind') == 'decode']
    if not reads or any(m.get('error') or m.get('text') is None for m in reads):
        return None
    try:
        return int(sum(finished_requests(m['text']) for m in reads))
    except (ValueError, OverflowError):
        return None  # a garbled counter line, or NaN: unknown


def _latency(names, hosts):
    out = []
    for name in names:
        for m in hosts[name].get('metrics') or []:
            entry = dict(host=name, kind=m.get('kind'), unit=m.get('unit'), url=m.get('url'), error=m.get('error'))
            entry.update(dict((k, None) for k, _l, _n in LATENCIES))
            try:
                entry.update(latencies(m.get('text')) if not m.get('error') else {})
            except ValueError as exc:
                entry['error'] = str(exc)  # a garbled histogram line: shown as the read's error
            out.append(entry)
    return out


def observe(hosts, clusters):
    """Add instances, proxy_members, kv_transfer (+ kv_silent: D hosts without a transfer line or whose journal
    could not be read) and latency to each cluster of diagnose() (HOSTS: its input, with per host the optional
    'metrics' [{kind, unit, url, text, error}], 'kv_log' {text, error} and 'proxy_members')."""
    for cl in clusters:
        names = [h['name'] for h in cl['hosts']]
        cl['instances'] = _instances(names, hosts)
        cl['proxy_members'] = [dict(hosts[n]['proxy_members'], host=n) for n in names
                               if hosts[n].get('proxy_members')]
        cl['kv_transfer'], cl['kv_silent'] = _kv(names, hosts)
        cl['latency'] = _latency(names, hosts)
    return clusters


def _text(cluster, key, value, tag='td', cls=None):
    return '<%s data-cluster="%s" data-key="%s"%s>%s</%s>' % (
        tag, escape(cluster), escape(key), ' class="%s"' % cls if cls else '', escape(str(value)), tag)


def _ports_section(cl):
    c = cl['name']
    parts = ['<h3>Instances and their ports</h3><table><tr><th>host</th><th>kind</th><th>unit</th><th>state</th>'
             '<th>API listening on</th><th>kv_port group</th><th>ports</th></tr>']
    for i, e in enumerate(cl['instances']):
        key = 'instances.%d.' % i
        ports = ''.join('<div class="%s" title="%s">%s %s</div>' % (
            STATE_CLASS[p['state']], escape(p['detail']), number(c, '%sports.%d.port' % (key, j), p['port'], 'span'),
            _text(c, '%sports.%d.state' % (key, j), p['state'], 'span')) for j, p in enumerate(e['ports'])) or '-'
        parts.append('<tr>%s%s%s%s<td>%s</td><td>%s</td><td>%s</td></tr>' % (
            _text(c, key + 'host', e['host']), _text(c, key + 'kind', e['kind']), _text(c, key + 'unit', e['unit']),
            _text(c, key + 'state', e['state'] or '?', cls='ok' if e['active'] else 'bad'),
            escape(', '.join(e['api_listening'])) if e['api_listening'] else '-',
            escape('%s on %s' % (e['group'], e['group_address'])) if e['group'] else '-', ports))
    parts.append('</table>')
    return parts


def _members_section(cl):
    c = cl['name']
    parts = ['<h3>Proxy members vs the inventory</h3>']
    if not cl['proxy_members']:
        return parts + ['<p>no proxy host of this cluster was read</p>']
    for i, pm in enumerate(cl['proxy_members']):
        key = 'proxy_members.%d.' % i
        if pm.get('error'):
            parts.append('<p class="bad">proxy on %s: %s</p>' % (
                escape(pm['host']), _text(c, key + 'error', pm['error'], 'span')))
            continue
        parts.append('<p>proxy on %s (%s)</p><table><tr><th>role</th><th>listed by the proxy</th><th>inventory</th>'
                     '<th>missing</th><th>extra</th><th>draining</th><th>isolated by a rolling change</th></tr>' % (
                         escape(pm['host']), escape(pm.get('source') or '?')))
        for r in ROLES:
            cells = []
            for what in ('live', 'desired', 'missing', 'extra', 'draining', 'isolated'):
                items = (pm.get(what) or {}).get(r) or []
                bad = what in ('missing', 'extra', 'isolated') and items
                cells.append('<td%s>%s</td>' % (' class="bad"' if bad else '', ''.join(
                    _text(c, '%s%s.%s.%d' % (key, what, r, j), m, 'div') for j, m in enumerate(items)) or '-'))
            parts.append('<tr><td>%s</td>%s</tr>' % (r, ''.join(cells)))
        parts.append('</table>')
    return parts


def _kv_section(cl, window):
    c = cl['name']
    parts = ['<h3>KV transfer per P-&gt;D pair (ms, from the decode journals, %s)</h3>' % escape(window)]
    if cl['kv_transfer']:
        parts.append('<table><tr><th>pair</th><th>addresses</th><th>requests</th>%s</tr>' % ''.join(
            '<th>%s</th>' % k for k in KEYS))
        for i, p in enumerate(cl['kv_transfer']):
            key = 'kv_transfer.%d.' % i
            parts.append('<tr>%s<td>%s -&gt; %s</td>%s%s</tr>' % (
                _text(c, key + 'pair', p['pair']), escape(p['prefill_address']), escape(p['decode_address']),
                number(c, key + 'requests', p['requests']),
                ''.join(number(c, '%sms.%s' % (key, k), p['ms'].get(k)) for k in KEYS)))
        parts.append('</table>')
        parts.append(kv_svg(cl['kv_transfer']))
    for i, s in enumerate(cl['kv_silent']):
        parts.append('<p class="warn">%s: %s</p>' % (_text(c, 'kv_silent.%d.host' % i, s['host'], 'span'), escape(
            'journal not read: %s' % s['error'] if s['error'] else 'no KV transfer line in the window' + (
                ': its engines have finished no request since they started (%s)' % PROXY_PICKS if s['finished'] == 0
                else ''))))
    return parts


def _latency_section(cl):
    c = cl['name']
    parts = ['<h3>Latency per instance (ms, the engines\' /metrics histograms since each engine started)</h3>']
    if not cl['latency']:
        return parts + ['<p>no engine /metrics was read</p>']
    parts.append('<table><tr><th>instance</th><th>metric</th>%s</tr>' % ''.join(
        '<th>%s</th>' % k for k in ('n', 'mean', 'p50', 'p90', 'p99')))
    for i, m in enumerate(cl['latency']):
        name = '%s %s' % (m['host'], m['kind'])
        if m['error']:
            parts.append('<tr><td>%s</td><td colspan="6" class="bad">%s</td></tr>' % (
                escape(name), _text(c, 'latency.%d.error' % i, m['error'], 'span')))
            continue
        for key, label, _names in LATENCIES:
            s = m[key]
            if s is None:
                parts.append('<tr><td>%s</td><td>%s</td><td colspan="5">not exposed</td></tr>' % (escape(name), label))
                continue
            parts.append('<tr><td>%s</td><td>%s <small>%s</small></td>%s</tr>' % (
                escape(name), label, escape(s['metric']), ''.join(
                    number(c, 'latency.%d.%s.%s' % (i, key, k), s[k]) for k in ('n', 'mean', 'p50', 'p90', 'p99'))))
    parts.append('</table>')
    for key, label, _names in LATENCIES:
        rows = [('%s %s' % (m['host'], m['kind']), m[key]) for m in cl['latency'] if not m['error']]
        if rows:
            parts.append('<h4>%s (ms)</h4>' % label)
            parts.append(buckets_svg(rows, label))
    return parts


CSS = '.ok{color:#2e7d32}.bad{color:#c62828}.warn{color:#ef6c00}'


def sections(cl, kv_window):
    """The page's parts of one cluster after its topology (HTML strings)."""
    return _ports_section(cl) + _members_section(cl) + _kv_section(cl, kv_window) + _latency_section(cl)
