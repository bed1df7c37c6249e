# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re
import xml.etree.ElementTree as ET

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_findings import diagnose
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_report import render_html, summary_lines

from test_doctor_findings import P_IP, P_MGMT, cluster, eng, set_unset_ip_on_p, tier


def broken():
    hosts = cluster()
    set_unset_ip_on_p(hosts)
    return diagnose(hosts)


def test_summary_table_rows_and_root_cause_first():
    findings, clusters = broken()
    lines = summary_lines(clusters, findings)
    assert lines[0].startswith('cluster c1: FAILING - root cause: step 1 HostIpUnset on p1')
    assert lines[1].split() == ['host', 'role', 'inventory', 'VLLM_HOST_IP', 'engine', 'port', 'group', 'D->P',
                                'issues']
    p_row = next(ln for ln in lines if ln.strip().startswith('p1 '))
    assert p_row.split()[:4] == ['p1', 'prefill', P_IP, 'unset'] and '0/8 28002-28009' in p_row
    assert any(ln.split()[:2] == ['proxy', '-'] for ln in lines)
    d_row = next(ln for ln in lines if ln.strip().startswith('d1 '))
    assert '0/8' in d_row
    numbered = [ln for ln in lines if re.match(r'^\s+\d+\. ', ln)]
    assert numbered[0].split()[1:3] == ['ROOT', 'CAUSE'] and 'consequence' in numbered[1]
    assert lines[lines.index(numbered[0]) + 1].strip().startswith('fix: set VLLM_HOST_IP=%s' % P_IP)


def test_healthy_summary():
    findings, clusters = diagnose(cluster())
    lines = summary_lines(clusters, findings)
    assert lines[0] == 'cluster c1: HEALTHY'
    assert not any(re.match(r'^\s+\d+\. ', ln) for ln in lines)


def test_the_proxy_tier_shows_each_process_as_haproxy_sees_it():
    hosts = cluster()
    hosts['p1']['inspect']['proxy'] = dict(unit='vllm-pd-front.service', port=8000, active=True,
                                           state=dict(ActiveState='active'), tier=tier('UP', 'DOWN'))
    findings, clusters = diagnose(hosts)
    lines = summary_lines(clusters, findings)
    assert [ln.split()[:4] for ln in lines if ln.split()[:1] in (['proxy1'], ['proxy2'])] == [
        ['proxy1', '-', 'UP', '0'], ['proxy2', '-', 'DOWN', '0']]
    page = render_html(clusters, findings)
    assert 'ProxyProcessDown' in page and 'vllm-pd-proxy@2.service (HAProxy server proxy2): DOWN' in page


def test_html_has_svg_topology_links_and_escapes_evidence():
    hosts = cluster()
    set_unset_ip_on_p(hosts)
    eng(hosts, 'p1')['logs'] = [dict(check='LogForceFreed', text='Force freed expired request:', severity='error',
                                     count=1, lines=['<script>alert(1)</script> Force freed expired request: r'])]
    findings, clusters = diagnose(hosts)
    html = render_html(clusters, findings, 'doctor <test>')
    assert '<script>' not in html and '&lt;script&gt;' in html
    assert '<title>doctor &lt;test&gt;</title>' in html
    svgs = re.findall(r'<svg.*?</svg>', html, re.S)
    assert len(svgs) == 1
    svg = ET.fromstring(svgs[0])       # well-formed XML, renders offline
    texts = [t.text for t in svg.iter('{http://www.w3.org/2000/svg}text')]
    assert any('KV side channel %s: 0/8 ZMTP' % P_MGMT in t for t in texts)
    assert 'VLLM_HOST_IP unset' in texts and 'proxy p1' in texts
    line = [e for e in svg.iter('{http://www.w3.org/2000/svg}line') if e.get('stroke-width') == '4'][0]
    assert line.get('stroke') == '#c62828'
    assert html.count('class="root"') == 1 and 'Root cause</b> (step 1, HostIpUnset on p1)' in html


def test_html_healthy_link_is_green():
    findings, clusters = diagnose(cluster())
    html = render_html(clusters, findings)
    assert 'No findings: every check passed.' in html and 'stroke="#2e7d32" stroke-width="4"' in html
