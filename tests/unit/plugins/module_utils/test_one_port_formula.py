# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One Mooncake port-group formula (issue 36 "One plan computed once"): the ports, width, size and range of a
kv_port group are computed in plugins/module_utils/common/port_formula.py (group_bounds) only. Fails when plugins/
or roles/ compute them again, recognised by how the removed copies were written:

- Python: a product of two parallel sizes (tp * pp, tp_size * pp_size * pcp_size, width *= tp_size), a product of a group width
  and a rank or rank count (rank * width, width * len(slot), (start + n) * width), or a sum/difference with a
  kv_port and such a product or width (kv_port + rank * width, kv + r * p_w + p_w - 1, (port - kv) // p_w);
- Jinja ({{ }} and {% %} of roles/ YAML and templates, comments left out): kv_port and a '*' in one expression,
  or a product of two parallel sizes (x.tp | int * x.pp).

ROOT may be set to another tree to check it (VLLM_PD_ONE_PORT_FORMULA_ROOT)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import os
import re

import pytest

import tree_sources

ROOT = os.environ.get('VLLM_PD_ONE_PORT_FORMULA_ROOT') or os.path.abspath(
    os.path.join(os.path.dirname(__file__), *['..'] * 4))
HOME = 'plugins/module_utils/common/port_formula.py'
SIZE = re.compile(r'^(tps?|pp|pcp|[pd]_tp|tp_size|pp_size|pcp_size|width|widths|[pd]_w|_?pp_pcp)$')
RANK = re.compile(r'(^|_)(rank|ranks|served|slot|slots|dp_rank_start|dp_size_local|group_rank)$')
KV = re.compile(r'(^|_)kv(_port)?$')
JINJA = re.compile(r'{{.*?}}|{%.*?%}', re.S)
JINJA_COMMENT = re.compile(r'{#.*?#}', re.S)
JINJA_SIZE = r'\b(tp|pp|pcp|tp_size|pp_size|pcp_size)\b'


def names(node):
    """The identifiers NODE reads: names, attributes, string subscripts and called functions."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.Subscript):
            key = n.slice.value if isinstance(n.slice, ast.Constant) else getattr(getattr(n.slice, 'value', None),
                                                                                  'value', None)
            if isinstance(key, str):
                out.add(key)
    return out


def _kinds(node):
    found = names(node)
    return (any(SIZE.match(x) for x in found), any(RANK.search(x) for x in found), any(KV.search(x) for x in found),
            any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) for n in ast.walk(node)))


def python_findings(rel, text):
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mult):
            if _kinds(node.target)[0] or _kinds(node.value)[0]:
                yield '%s:%d multiplies parallel sizes into a width' % (rel, node.lineno)
        if not isinstance(node, ast.BinOp):
            continue
        left, right = _kinds(node.left), _kinds(node.right)
        if isinstance(node.op, ast.Mult):
            if (left[0] and right[0]) or (left[0] and right[1]) or (left[1] and right[0]):
                yield '%s:%d multiplies parallel sizes / a width and a rank' % (rel, node.lineno)
        elif isinstance(node.op, (ast.Add, ast.Sub, ast.FloorDiv)):
            if (left[2] and (right[0] or right[3])) or (right[2] and (left[0] or left[3])):
                yield '%s:%d offsets a kv_port by a group width' % (rel, node.lineno)


def jinja_findings(rel, text):
    for m in JINJA.finditer(JINJA_COMMENT.sub('', text)):
        expr = m.group()
        if ('kv_port' in expr and '*' in expr) or re.search(JINJA_SIZE + r'[^*{}]*\*[^*{}]*' + JINJA_SIZE, expr):
            line = text.count('\n', 0, text.find(expr)) + 1 if expr in text else 0
            yield '%s:%d computes a port group in Jinja: %s' % (rel, line, ' '.join(expr.split())[:80])


def sources():
    return tree_sources.sources(ROOT)


def findings(rel, text):
    return list(python_findings(rel, text) if rel.endswith('.py') else jinja_findings(rel, text))


def test_the_port_group_is_computed_in_port_formula_only():
    found = [f for rel, text in sources() if rel != HOME for f in findings(rel, text)]
    assert found == [], 'a second port-group formula; call group_bounds/group_width/port_group of %s ' \
        '(Jinja: filter pd_group_ports):\n%s' % (HOME, '\n'.join(found))


@pytest.mark.parametrize('rel, text', [
    # the removed copies, as they were written
    ('plugins/module_utils/common/params.py', 'def group_end(kv_port, width, s, n):\n'
                                              '    return kv_port + (s + n) * width - 1\n'),
    ('plugins/module_utils/common/params.py', 'width = 1\nfor v in (tp_size, pp_size, pcp_size):\n'
                                              '    width *= v\n'),
    ('plugins/filter/pd_instances.py', 'width = tp * pp * pcp\n'),
    ('plugins/filter/pd_instances.py', 'kv = base_kv + slot[0] * width\n'),
    ('plugins/filter/pd_instances.py', 'n = width * served\n'),
    ('plugins/filter/pd_instances.py', 'ports = [base + (start + r) * width + (p * pcp + c) * tp + t for r in rs]\n'),
    ('plugins/module_utils/inventory/monitoring_ports.py',
     'lo, hi = kv_port + served[0] * width, kv_port + (served[-1] + 1) * width - 1\n'),
    ('plugins/module_utils/inventory/inventory_rules.py',
     'widths = dict((k, tps[k] * _pp_pcp(view, h, k)[0] * _pp_pcp(view, h, k)[1]) for k in KINDS)\n'),
    ('plugins/module_utils/inventory/inventory_rules.py', 'hi = kv + max(served["prefill"]) * p_w + p_w - 1\n'),
    ('plugins/module_utils/inventory/inventory_rules.py', 'group_rank = (port - kv) // p_w\n'),
    ('roles/preflight/tasks/host.yml', "x: >-\n  {%- set port = (first.kv_port | int + first.port_rank_start | int"
                                       " * first.tp | int * first.pp | default(1) | int) -%}\n"),
    ('roles/x/tasks/main.yml', "x: \"{{ item.tp | int * item.pp | int }}\"\n"),
])
def test_the_guard_knows_the_removed_copies(rel, text):
    assert findings(rel, text), text


def test_the_guard_leaves_other_arithmetic_alone():
    assert findings('plugins/x.py', 'end = group_bounds(kv_port, tp, pp, pcp, r, n).last\nbest = 65535 - (end - kv)\n'
                                    'port = api_port + index\n') == []
    assert findings('roles/x/defaults/main.yml', '# kv_port .. kv_port + tp*pp*pcp*dp - 1\n'
                                                 'd: "{{ vllm_pd_kv_port | int + 100 }}"\n'
                                                 "p: \"{{ {#- kv_port + rank * tp -#} first | pd_group_ports | first }}\"\n") == []
