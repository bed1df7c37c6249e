# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One rule of cluster membership (issue 36 "One plan computed once"): who is in a cluster is decided in
plugins/module_utils/common/membership.py (cluster_hosts; Jinja: filter pd_cluster_hosts) only. Fails when plugins/ or
roles/ decide it again, recognised by how the removed copies were written:

- Python: a comparison (==, !=, in) one side of which reads vllm_pd_cluster (a subscript or a .get());
- Jinja ({{ }} and {% %} of roles/ YAML and templates, comments left out): selectattr('vllm_pd_cluster', <test>, ...)
  with a test that compares (equalto, ==, eq, in, sameas), or a select/reject over vllm_pd_cluster values.

Listing the clusters (map(attribute='vllm_pd_cluster') | unique) is no membership and passes."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import os
import re

import pytest

import tree_sources

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *['..'] * 4))
HOME = 'plugins/module_utils/common/membership.py'
JINJA = re.compile(r'{{.*?}}|{%.*?%}', re.S)
JINJA_COMMENT = re.compile(r'{#.*?#}', re.S)
JINJA_MEMBERSHIP = re.compile(r"""selectattr\(\s*['"]vllm_pd_cluster['"]\s*,\s*['"](equalto|==|eq|in|sameas)['"]""")


def _reads_cluster(node):
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value == 'vllm_pd_cluster':
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == 'get' and n.args \
                and isinstance(n.args[0], ast.Constant) and n.args[0].value == 'vllm_pd_cluster':
            return True
    return False


def python_findings(rel, text):
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops) \
                and any(_reads_cluster(side) for side in [node.left] + node.comparators):
            yield '%s:%d compares a vllm_pd_cluster' % (rel, node.lineno)


def jinja_findings(rel, text):
    text = JINJA_COMMENT.sub('', text)
    for m in JINJA.finditer(text):
        if JINJA_MEMBERSHIP.search(m.group()):
            line = text.count('\n', 0, m.start()) + 1
            yield '%s:%d selects the hosts of a cluster in Jinja: %s' % (rel, line, ' '.join(m.group().split())[:90])


def sources():
    return tree_sources.sources(ROOT, bases=('plugins', 'roles', 'playbooks'))


def findings(rel, text):
    return list(python_findings(rel, text) if rel.endswith('.py') else jinja_findings(rel, text))


def test_cluster_membership_is_decided_in_membership_only():
    found = [f for rel, text in sources() if rel != HOME for f in findings(rel, text)]
    assert found == [], 'a second rule of cluster membership; call cluster_hosts of %s (Jinja: filter ' \
        'pd_cluster_hosts):\n%s' % (HOME, '\n'.join(found))


@pytest.mark.parametrize('rel, text', [
    # the removed copies, as they were written
    ('plugins/module_utils/doctor/doctor_cluster.py',
     "cluster = v.get('vllm_pd_cluster', _MISSING)\nif cluster is not _MISSING and v.get('vllm_pd_cluster') == own:\n    pass\n"),
    ('plugins/module_utils/npu/npu_checks.py',
     "if str(variables.get('vllm_pd_cluster', '')) != cluster or r is None:\n    pass\n"),
    ('plugins/module_utils/common/x.py', "hosts = [h for h in g if str(hostvars[h]['vllm_pd_cluster']) == str(c)]\n"),
    ('roles/rollout/tasks/gate.yml', "x: \"{{ hosts | map('extract', hostvars) | selectattr('vllm_pd_cluster', 'defined')\n"
                                     "  | selectattr('vllm_pd_cluster', 'equalto', vllm_pd_cluster) | list }}\"\n"),
    ('roles/proxy/vars/main.yml', "x: \"{{ hostvars | dict2items | map(attribute='value') | selectattr(\"vllm_pd_cluster\", \"==\", c) }}\"\n"),
])
def test_the_guard_knows_the_removed_copies(rel, text):
    assert findings(rel, text), text


def test_the_guard_leaves_listing_and_labels_alone():
    assert findings('roles/x/tasks/main.yml', "c: \"{{ hosts | map('extract', hostvars) | selectattr('vllm_pd_cluster', 'defined')"
                                              " | map(attribute='vllm_pd_cluster') | map('string') | unique | list }}\"\n"
                                              "# selectattr('vllm_pd_cluster', 'equalto', x) in a comment\n") == []
    assert findings('plugins/x.py', "label = {'cluster': str(hv['vllm_pd_cluster'])}\nown = v.get('vllm_pd_cluster', '')\n") == []
