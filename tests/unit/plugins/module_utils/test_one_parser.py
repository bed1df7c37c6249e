# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One parser each (issue 36 item 3): versions (common/releases.py), env files (common/env_file.py), `ip -o addr`
(host/ip_addr.py) and Prometheus text (common/prom_text.py). Fails when plugins/ or roles/ grow a second one,
recognised by how the removed copies were written: a regex that reads a version, an address line or a metric line
(or its label pairs), a split of a line at '{' or '}', a function that skips '#' lines and splits at '=', the
string 'inet6', or an `ip addr` command in a file that does not read its output with host/ip_addr.py.
ROOT may be set to another tree to check it (VLLM_PD_ONE_PARSER_ROOT)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import os
import re

import pytest

import tree_sources

ROOT = os.environ.get('VLLM_PD_ONE_PARSER_ROOT') or os.path.abspath(os.path.join(os.path.dirname(__file__), *['..'] * 4))
HOMES = {
    'version': 'plugins/module_utils/common/releases.py',
    'env file': 'plugins/module_utils/common/env_file.py',
    'ip -o addr': 'plugins/module_utils/host/ip_addr.py',
    'prometheus': 'plugins/module_utils/common/prom_text.py',
}
# readers of other KEY=VALUE formats, not of an EnvironmentFile=
OTHER_FORMATS = {('plugins/module_utils/npu/npu_parse.py', 'parse_key_values'): '/etc/hccn.conf and npu-smi output'}
PROM = 'vllm:num_requests_running{engine="0",model_name="m"} 3.0'
ADDR = r'2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0\       valid_lft forever'
VERSIONS = ('0.18.0rc1', 'v0.23.0.post1')
RE_CALLS = ('compile', 'match', 'search', 'findall', 'finditer', 'sub', 'subn', 'fullmatch', 'split')


def sources():
    return tree_sources.sources(ROOT, suffixes=('.py',))


def _const(node):
    return node.value if isinstance(node, ast.Constant) else None


def regexes(tree):
    """(line, pattern) of the literal patterns given to re.* ('...%s...' % x: %s read as a metric name)."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RE_CALLS
                and isinstance(node.func.value, ast.Name) and node.func.value.id == 're' and node.args):
            arg = node.args[0]
            if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mod) and isinstance(_const(arg.left), str):
                yield node.lineno, arg.left.value.replace('%s', 'vllm:num_requests_running')
            elif isinstance(_const(arg), str):
                yield node.lineno, arg.value


def regex_kinds(pattern):
    try:
        rx = re.compile(pattern, re.M)
    except re.error:
        return []
    kinds = []
    if all(rx.fullmatch(v) for v in VERSIONS) and not rx.fullmatch('hello'):
        kinds.append('version')
    m = rx.search(ADDR)
    if m and m.start() <= ADDR.index('inet') and m.end() >= ADDR.index('/24'):
        kinds.append('ip -o addr')
    m = rx.search(PROM)
    if m and (('{' in pattern and m.start() <= PROM.index('{') and m.end() >= len(PROM))
              or ('="' in m.group() and not rx.fullmatch('hello'))):
        kinds.append('prometheus')
    return kinds


def _calls(node):
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args:
            yield n.func.attr, n.args[0]


def findings(rel, text):
    """(kind, where) of every parser of the four kinds in one file."""
    tree = ast.parse(text)
    for line, pattern in regexes(tree):
        for kind in regex_kinds(pattern):
            yield kind, '%s:%d regex %r' % (rel, line, pattern[:60])
    for node in ast.walk(tree):
        if _const(node) == 'inet6':
            yield 'ip -o addr', "%s:%d compares with 'inet6'" % (rel, node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            attr, arg = node.func.attr, _const(node.args[0])
            if (attr in ('split', 'partition') and arg == '{') or (attr in ('rsplit', 'rpartition') and arg == '}'):
                yield 'prometheus', '%s:%d splits a metric line at %r' % (rel, node.lineno, arg)
        if isinstance(node, ast.FunctionDef) and (rel, node.name) not in OTHER_FORMATS:
            calls = list(_calls(node))
            hashes = any(a == 'startswith' and ('#' in [_const(e) for e in getattr(v, 'elts', [])] or _const(v) == '#')
                         for a, v in calls)
            equals = any(a in ('partition', 'split') and _const(v) == '=' for a, v in calls)
            if hashes and equals:
                yield 'env file', '%s:%d %s() skips # lines and splits at =' % (rel, node.lineno, node.name)
    if re.search(r"""['"]-o['"],\s*['"]addr['"]|\bip\(['"]addr['"]""", text) and 'host.ip_addr import' not in text:
        yield 'ip -o addr', '%s runs `ip addr` without host/ip_addr.py' % rel


def all_findings():
    return [(kind, where) for rel, text in sources() for kind, where in findings(rel, text) if HOMES[kind] != rel]


def test_each_kind_has_one_parser():
    found = all_findings()
    assert found == [], 'a second parser; use the one in %s:\n%s' % (
        ', '.join('%s: %s' % kv for kv in sorted(HOMES.items())), '\n'.join('%s: %s' % f for f in found))


@pytest.mark.parametrize('kind, text', [
    ('version', "import re\nV = re.compile(r'^v?(\\d+)\\.(\\d+)(?:\\.(\\d+))?(?:(rc|\\.?post|\\.?dev)(\\d*))?$')\n"),
    ('ip -o addr', "import re\nL = re.compile(r'^\\d+:\\s+(\\S+?)(?:@\\S+)?\\s+(inet6?)\\s+([0-9a-fA-F.:]+)/(\\d+)')\n"),
    ('ip -o addr', "def f(out):\n    return [x for x in out if x[2] in ('inet', 'inet6')]\n"),
    ('ip -o addr', "def f(run):\n    return run(['ip', '-o', 'addr', 'show'])\n"),
    ('prometheus', "import re\nS = re.compile(r'^%s(?:\\{[^}]*\\})?\\s+(\\S+)' % 'x', re.M)\n"),
    ('prometheus', "import re\nS = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{(?P<labels>.*)\\})?\\s+(?P<value>\\S+)')\n"),
    ('prometheus', "import re\nL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)=\"(?P<value>(?:[^\"\\\\]|\\\\.)*)\"')\n"),
    ('prometheus', "def g(line):\n    return line.split('{', 1)[0], line.rsplit('}', 1)[1]\n"),
    ('env file', "def read(text):\n    for line in text.splitlines():\n        if not line.startswith('#'):\n"
                 "            k, _s, v = line.partition('=')\n"),
])
def test_the_guard_knows_the_removed_copies(kind, text):
    assert sorted(set(k for k, _w in findings('roles/x/files/copy.py', text))) == [kind]


def test_the_homes_hold_their_parser():
    texts = dict(sources())
    for kind, home in HOMES.items():
        assert home in texts and (kind in [k for k, _w in findings(home, texts[home])] or kind == 'env file'), home
