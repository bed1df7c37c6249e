# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rendering of the doctor's diagnosis: a text summary table and a self-contained HTML report with an
inline SVG topology per cluster (sites are often offline: no scripts, fonts or images from elsewhere).
Pure functions over the output of doctor_findings.diagnose().
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from html import escape

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_page
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_findings import FAILING, HOST_IP_ENV, STEPS

COLOR = dict(ok='#2e7d32', partial='#ef6c00', down='#c62828', neutral='#9e9e9e')
SEV_COLOR = dict(critical='#b71c1c', error='#e65100', warning='#f9a825', info='#607d8b')
BOX_W, BOX_H, GAP = 310, 134, 26


def _engine_line(e):
    ip = e['vllm_host_ip'] if e['vllm_host_ip'] else ('unset' if e['env_known'] else '?')
    g = e.get('group')
    group = '%d/%d %s' % (g['up'], g['total'], g['span']) if g else '-'
    return ip, '%s%s' % (e['state'] or '?', ' pid %d' % e['pid'] if e.get('pid') else ''), group


def _cell(value, width):
    text = str(value if value is not None else '-')
    return text[:width].ljust(width)


def summary_lines(clusters, findings):
    """The end-of-run table: one block per cluster, one row per host and engine, then the findings."""
    cols = (('host', 8), ('role', 7), ('inventory', 15), (HOST_IP_ENV, 15), ('engine', 14),
            ('port group', 15), ('D->P', 5), ('issues', 6))
    lines = []
    for cl in clusters:
        root = cl['root_cause']
        lines.append('cluster %s: %s%s' % (cl['name'], cl['status'].upper(), (
            ' - root cause: step %d %s on %s: %s' % (root['step'], root['check'], root['host'], root['title'])
            if root else '')))
        lines.append('  ' + ' '.join(_cell(c, w) for c, w in cols))
        mine = [f for f in findings if f['cluster'] == cl['name']]
        for h in cl['hosts']:
            issues = len([f for f in mine if f['host'] == h['name'] and f['severity'] in FAILING])
            rows = []
            for e in h['engines']:
                ip, state, group = _engine_line(e)
                links = [ln for ln in cl['links'] if ln['decode'] == h['name']]
                zmtp = ', '.join('%d/%d' % (ln['ok'], ln['total']) for ln in links) if e['kind'] == 'decode' else '-'
                rows.append((e['kind'], ip, state, group, zmtp))
            if h.get('proxy'):
                rows.append(('proxy', '-', h['proxy']['state'] or '?', ':%s' % h['proxy']['port'], '-'))
                # the proxy tier: each process as HAProxy sees it
                for px in (h['proxy'].get('tier') or {}).get('processes') or []:
                    rows.append((px['server'], '-', px['status'], '%d in flight' % px['in_flight'], '-'))
            if not rows:
                rows.append(('/'.join(h['roles']) or '-', '?', 'not inspected' if not h['reachable'] else '-',
                             '-', '-'))
            for i, (role, ip, state, group, zmtp) in enumerate(rows):
                vals = (h['name'] if i == 0 else '', role, h['address'] if i == 0 else '', ip, state, group, zmtp,
                        issues if i == 0 else '')
                lines.append('  ' + ' '.join(_cell(v, w) for v, (_c, w) in zip(vals, cols)).rstrip())
        for n, f in enumerate(mine, 1):
            lines.append('  %2d. %-11s %-8s step %d %s on %s: %s' % (
                n, f['role'].upper() if f['role'] == 'root cause' else f['role'], f['severity'], f['step'],
                f['check'], f['host'], f['title']))
            if f['role'] == 'root cause':
                lines.append('      fix: %s' % f['fix'])
    return lines


def _box(x, y, title, rows, bad):
    out = ['<rect x="%d" y="%d" width="%d" height="%d" rx="8" fill="%s" stroke="%s" stroke-width="%d"/>' % (
        x, y, BOX_W, BOX_H, '#fff5f5' if bad else '#f5fbf5', COLOR['down'] if bad else COLOR['ok'], 3 if bad else 2),
        '<text x="%d" y="%d" font-weight="bold" font-size="14">%s</text>' % (x + 10, y + 20, escape(title))]
    for i, (text, color) in enumerate(rows[:6]):
        out.append('<text x="%d" y="%d" font-size="12" fill="%s">%s</text>' % (
            x + 10, y + 40 + 16 * i, color or '#222', escape(text)))
    return out


def _host_rows(h):
    rows = [('%s  %s' % (h['address'] or 'address ?', '(%s)' % h['interface'] if h.get('interface') else ''), None)]
    for e in h['engines']:
        ip, state, group = _engine_line(e)
        good_ip = e['vllm_host_ip'] and e['vllm_host_ip'] == h['address']
        rows.append(('%s %s' % (HOST_IP_ENV, ip), None if good_ip else COLOR['down']))
        rows.append(('%s %s' % (e['unit'], state), None if e['active'] else COLOR['down']))
        if e.get('group'):
            g = e['group']
            rows.append(('kv group %s on %s' % (group, g['address']),
                         None if g['up'] == g['total'] and not g['foreign'] else COLOR['down']))
            if g['foreign']:
                rows.append(('held by another process: %s' % ','.join(str(p) for p in g['foreign']), COLOR['down']))
    if h.get('proxy'):
        rows.append(('%s :%s %s' % (h['proxy']['unit'], h['proxy']['port'], h['proxy']['state']),
                     None if h['proxy']['active'] else COLOR['down']))
    if not h['reachable']:
        rows.append(('not inspected', COLOR['down']))
    return rows


def topology_svg(cl, findings):
    """P hosts on the left, D hosts on the right, proxies on top; D->P links coloured by ZMTP result."""
    bad_hosts = set(f['host'] for f in findings if f['cluster'] == cl['name'] and f['severity'] in FAILING)
    ps = [h for h in cl['hosts'] if 'prefill' in h['roles']]
    ds = [h for h in cl['hosts'] if 'decode' in h['roles']]
    pxs = [h for h in cl['hosts'] if h.get('proxy')]
    top = 30 + (BOX_H // 2 + 40 if pxs else 0)
    width = 2 * BOX_W + 360
    height = top + max(len(ps), len(ds), 1) * (BOX_H + GAP) + 20
    pos = {}
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'role="img" aria-label="topology of cluster %s">' % (width, height, escape(cl['name']))]
    for i, h in enumerate(ps):
        pos[('P', h['name'])] = (20, top + i * (BOX_H + GAP))
    for i, h in enumerate(ds):
        pos[('D', h['name'])] = (width - BOX_W - 20, top + i * (BOX_H + GAP))
    for i, h in enumerate(pxs):
        x = (width - 200) // 2 + i * 220
        out.append('<rect x="%d" y="10" width="200" height="%d" rx="8" fill="#f3f3ff" stroke="%s" stroke-width="2"/>'
                   % (x, BOX_H // 2, COLOR['ok'] if h['proxy']['active'] else COLOR['down']))
        out.append('<text x="%d" y="30" font-weight="bold" font-size="13">proxy %s</text>' % (x + 10, escape(h['name'])))
        out.append('<text x="%d" y="48" font-size="12">%s:%s %s</text>' % (
            x + 10, escape(h['address'] or '?'), escape(str(h['proxy']['port'])), escape(h['proxy']['state'] or '?')))
        for (side, name), (bx, by) in sorted(pos.items()):
            tx = bx + BOX_W // 2
            out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-dasharray="4 4"/>' % (
                x + 100, 10 + BOX_H // 2, tx, by, COLOR['neutral']))
    for ln in cl['links']:
        if ('P', ln['prefill']) not in pos or ('D', ln['decode']) not in pos:
            continue
        px, py = pos[('P', ln['prefill'])]
        dx, dy = pos[('D', ln['decode'])]
        x1, y1, x2, y2 = dx, dy + BOX_H // 2, px + BOX_W, py + BOX_H // 2
        color = COLOR[ln['status']]
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="4" marker-end="url(#arrow-%s)"/>'
                   % (x1, y1, x2, y2, color, ln['status']))
        out.append('<text x="%d" y="%d" font-size="12" text-anchor="middle" fill="%s">KV side channel %s: %d/%d ZMTP'
                   '</text>' % ((x1 + x2) // 2, (y1 + y2) // 2 - 8, color, escape(ln['address'] or '?'), ln['ok'],
                                ln['total']))
    for (side, name), (x, y) in pos.items():
        h = next(hh for hh in cl['hosts'] if hh['name'] == name)
        out += _box(x, y, '%s  %s' % ('P prefill' if side == 'P' else 'D decode', name), _host_rows(h),
                    name in bad_hosts)
    defs = ''.join('<marker id="arrow-%s" markerUnits="userSpaceOnUse" markerWidth="14" markerHeight="14" refX="13" '
                   'refY="7" orient="auto"><path d="M0,0 L14,7 L0,14 z" fill="%s"/></marker>' % (k, v)
                   for k, v in COLOR.items())
    out.insert(1, '<defs>%s</defs>' % defs)
    out.append('</svg>')
    return '\n'.join(out)


CSS = """body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px 0 24px}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left;font-size:13px}
th{background:#eee}pre{margin:0;white-space:pre-wrap;font-size:12px}.root{background:#fff0f0}
.status{display:inline-block;padding:2px 10px;border-radius:10px;color:#fff;font-weight:bold}
.failing{background:#c62828}.warnings{background:#f9a825}.healthy{background:#2e7d32}""" + doctor_page.CSS


def render_html(clusters, findings, title='vLLM PD doctor', kv_window=''):
    """The page of one run. A cluster that doctor_page.observe() saw also gets its instances' ports, the proxy's
    members, the KV transfer per P->D pair (KV_WINDOW: which journal window) and the latency distributions.
    Findings cells carry data-key findings.N.FIELD (N: the index in FINDINGS, the JSON's list)."""
    parts = ['<!DOCTYPE html>', '<html lang="en"><head><meta charset="utf-8"><title>%s</title>' % escape(title),
             '<style>%s</style></head><body>' % CSS, '<h1>%s</h1>' % escape(title),
             '<p>Diagnosis in the field report\'s order: %s. The first failing finding of a cluster is its root '
             'cause; later ones are consequences.</p>' % escape(', '.join(
                 'step %d %s' % (k, v) for k, v in sorted(STEPS.items()) if k))]
    for cl in clusters:
        c = cl['name']
        root = cl['root_cause']
        parts.append('<h2>Cluster %s <span class="status %s">%s</span></h2>' % (
            escape(c), cl['status'], escape(cl['status'])))
        if root:
            parts.append('<p><b>Root cause</b> (step %d, %s on %s): %s<br><b>Fix:</b> %s</p>' % (
                root['step'], escape(root['check']), escape(root['host']), escape(root['title']), escape(root['fix'])))
        parts.append(topology_svg(cl, findings))
        mine = [(i, f) for i, f in enumerate(findings) if f['cluster'] == c]
        if not mine:
            parts.append('<p>No findings: every check passed.</p>')
        else:
            parts.append('<table><tr><th>#</th><th>role</th><th>severity</th><th>step</th><th>host</th><th>check</th>'
                         '<th>finding</th><th>evidence</th><th>fix</th></tr>')
            for n, (i, f) in enumerate(mine, 1):
                def cell(field, i=i, f=f):
                    return '<td data-cluster="%s" data-key="findings.%d.%s">%s</td>' % (
                        escape(c), i, field, escape(f[field]))
                parts.append('<tr class="%s"><td>%d</td><td>%s</td><td style="color:%s"><b>%s</b></td><td>%d %s</td>'
                             '%s%s%s<td><pre>%s</pre></td>%s</tr>' % (
                                 'root' if f['role'] == 'root cause' else '', n, escape(f['role']),
                                 SEV_COLOR[f['severity']], escape(f['severity']), f['step'], escape(STEPS[f['step']]),
                                 cell('host'), cell('check'), cell('title'), escape('\n'.join(f['evidence'])),
                                 cell('fix')))
            parts.append('</table>')
        if 'instances' in cl:
            parts += doctor_page.sections(cl, kv_window)
    parts.append('</body></html>')
    return '\n'.join(parts) + '\n'
