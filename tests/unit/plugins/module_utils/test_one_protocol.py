# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One place for the protocol the collection speaks with upstream (issue 36 "contracts bind the code, not just the
table"): the proxy's routes, the KV connector's names and the OpenAI completion request and answer are facts of the
release table (plugins/module_utils/common/releases.py), which tests/contract asserts against every release's source.
A copy in plugins/ or roles/ would escape that contract: a rename upstream would break it silently. This fails on one,
recognised in code (not in comments or docstrings):

- Python: a string constant that is a route of the proxy (or ends with one, a URL), a connector name, the request-id
  header, a key of the completion answer or of the proxy's prefill request that only that protocol has (choices,
  completion_tokens, kv_transfer_params, do_remote_decode...), the stream's [DONE]; and a completion body: a dict
  literal or a dict(...) of a body (dict(body, max_tokens=1)) with two or more of the request's keys;
- YAML and Jinja (roles/, comments left out): a route after '}}', ':PORT' or a quote, a connector name as a value or
  quoted, the request-id header, one of those answer keys read as an attribute or quoted, and a uri body with two or
  more of the request's keys.

The module options of pd_smoke and pd_bench (prompt, max_tokens, endpoint...) are the collection's own names and pass.
tests/unit/test_upstream_literals.py guards the other kinds (flags, metrics, env names, every table value)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import os
import re

import tree_sources
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *['..'] * 4))
HOME = 'plugins/module_utils/common/releases.py'
# where a literal may stay, and why: (path, literal) -> why
ALLOWED = {
    ('plugins/modules/pd_bench.py', '/v1/completions'): 'the documented default of its endpoint option (users may '
                                                        'change it; the role passes the table\'s)',
}
JINJA_COMMENT = re.compile(r'{#.*?#}', re.S)


def _entries():
    return list(releases.RELEASES.values())


def routes():
    """Every proxy and admin route of every release."""
    out = set()
    for e in _entries():
        out.update(e['proxy_routes'])
        out.update(v for v in (e['proxy_health_route'], e['proxy_add_route'], e['proxy_remove_route'],
                               e['proxy_completions_route']) if v)
    return out


def connectors():
    """The connector class and module names of every release."""
    return {n for e in _entries() for n in (e['connector'], e['connector_module'])}


def request_keys():
    """The completion request's keys the smoke, the rolling proof and the load generator send."""
    return {k for e in _entries() for k in e['completion_request'].values()}


def protocol_keys():
    """Keys only the completion protocol has (a generic word like text, id or model is no sign of it): the answer's
    choices, completion_tokens and kv_transfer_params, and the keys of the proxy's prefill request's params."""
    out = set()
    for e in _entries():
        answer = e['completion_answer']
        out.update(answer[k] for k in ('choices', 'completion_tokens', 'kv_transfer_params'))
        # remote_host and remote_port are also the collection's own words (the port checks)
        out.update(k for k in e['proxy_prefill_request'][e['completion_request']['kv_transfer_params']]
                   if k not in ('remote_host', 'remote_port'))
    return out


def headers():
    return {e['request_id_header'] for e in _entries()}


def stream_marks():
    return {e['completion_stream']['done'] for e in _entries()}


def _docstrings(tree):
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    # DOCUMENTATION, EXAMPLES and RETURN of a module are documentation
    for node in tree.body if isinstance(tree, ast.Module) else []:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', '') in ('DOCUMENTATION', 'EXAMPLES', 'RETURN')
                                                for t in node.targets):
            out.add(id(node.value))
    return out


def _table_keys(tree):
    """The constants that are keys of a table read: NAME['key'] with NAME a module constant (UP, ANSWER, REQUEST:
    a copy of runtime(None) or one of its facts), also nested (UP['completion_answer']['choices'])."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name) and base.id.lstrip('_').isupper():
                out.add(id(node.slice))
    return out


def _route_of(value):
    """The route VALUE is or ends with (a URL), or None."""
    for route in routes():
        if value == route or re.search(r'(?::\d+|\}|^http://\S*)%s$' % re.escape(route), value):
            return route
    return None


def python_findings(rel, text):
    tree = ast.parse(text)
    docs = _docstrings(tree) | _table_keys(tree)
    keys = request_keys()
    lower_headers = {h.lower() for h in headers()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in docs:
            value = node.value.decode('utf-8', 'replace') if isinstance(node.value, bytes) else node.value
            route = _route_of(value)
            if route:
                yield '%s:%d: proxy route %r' % (rel, node.lineno, route)
            elif value in connectors():
                yield '%s:%d: connector name %r' % (rel, node.lineno, value)
            elif value.lower() in lower_headers:
                yield '%s:%d: request-id header %r' % (rel, node.lineno, value)
            elif value in protocol_keys() or value in stream_marks():
                yield '%s:%d: completion protocol key %r' % (rel, node.lineno, value)
        body = None
        if isinstance(node, ast.Dict):
            body = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        elif isinstance(node, ast.Call) and getattr(node.func, 'id', None) == 'dict' and node.args:
            body = [k.arg for k in node.keywords if k.arg]
        if body is not None and len(set(body) & keys) >= 2:
            yield '%s:%d: a completion body with keys %s' % (rel, node.lineno, ', '.join(sorted(set(body) & keys)))


def _line(text, pos):
    return text.count('\n', 0, pos) + 1


def yaml_findings(rel, text):
    # comment lines and Jinja comments are documentation
    text = JINJA_COMMENT.sub(lambda m: '\n' * m.group().count('\n'), text)
    text = '\n'.join('' if line.lstrip().startswith('#') else line for line in text.split('\n'))
    for route in sorted(routes()):
        for m in re.finditer(r'''(?:\}\}|:\d+|["'])%s(?![\w/-])''' % re.escape(route), text):
            yield '%s:%d: proxy route %r' % (rel, _line(text, m.start()), route)
    for name in sorted(connectors()):
        for m in re.finditer(r'''["']%s["']|:\s+%s\s*$''' % (re.escape(name), re.escape(name)), text, re.M):
            yield '%s:%d: connector name %r' % (rel, _line(text, m.start()), name)
    for header in sorted(headers()):
        for m in re.finditer(re.escape(header), text, re.I):
            yield '%s:%d: request-id header %r' % (rel, _line(text, m.start()), header)
    for key in sorted(protocol_keys()):
        for m in re.finditer(r'''["']%s["']|\.%s\b''' % (re.escape(key), re.escape(key)), text):
            yield '%s:%d: completion protocol key %r' % (rel, _line(text, m.start()), key)
    # a uri body (a YAML mapping under body:, or a Jinja dict) with two or more of the request's keys
    keys = request_keys()
    for m in re.finditer(r'^(\s*)body:\s*\n((?:\1\s+.*\n?)+)', text, re.M):
        found = {k for k in keys if re.search(r'^\s+%s:' % re.escape(k), m.group(2), re.M)}
        if len(found) >= 2:
            yield '%s:%d: a completion body with keys %s' % (rel, _line(text, m.start()), ', '.join(sorted(found)))
    for m in re.finditer(r'{{.*?}}', text, re.S):
        found = {k for k in keys if re.search(r'''["']%s["']\s*:''' % re.escape(k), m.group())}
        if len(found) >= 2:
            yield '%s:%d: a completion body with keys %s' % (rel, _line(text, m.start()), ', '.join(sorted(found)))


def findings(rel, text):
    return list(python_findings(rel, text) if rel.endswith('.py') else yaml_findings(rel, text))


def sources():
    return tree_sources.sources(ROOT, bases=('plugins', 'roles'))


def _allowed(finding):
    rel = finding.split(':', 1)[0]
    return any(rel == where and repr(literal) in finding for where, literal in ALLOWED)


def test_the_protocol_with_upstream_is_in_the_release_table_only():
    found = [f for rel, text in sources() if rel != HOME for f in findings(rel, text) if not _allowed(f)]
    assert found == [], 'an upstream literal outside the release table; read it from %s (module_utils: ' \
        'runtime(version); roles: pd_release_facts) and assert it in tests/contract:\n%s' % (HOME, '\n'.join(found))


def test_every_allowance_is_used():
    used = {(rel, literal) for rel, text in sources() for f in findings(rel, text)
            for where, literal in ALLOWED if rel == where and repr(literal) in f}
    assert sorted(set(ALLOWED) - used) == []


def test_the_guard_knows_the_table():
    """The guard's lists come from the table (a key renamed there leaves no list empty)."""
    assert {'/v1/completions', '/healthcheck', '/instances/add', '/instances/remove'} <= routes()
    assert 'MooncakeConnectorV1' in connectors() and {'prompt', 'max_tokens', 'temperature'} <= request_keys()
    assert {'choices', 'completion_tokens', 'kv_transfer_params', 'do_remote_decode'} <= protocol_keys()
    assert headers() == {'X-Request-Id'} and stream_marks() == {'[DONE]'}


# the removed copies, as they were written, and the kinds the guard must know in roles/
KNOWN_COPIES = [
    ('plugins/module_utils/verify/smoke.py', "REQUEST_ID_HEADER = 'X-Request-Id'\n"),
    ('plugins/module_utils/verify/smoke.py',
     "def body(model, prompt, max_tokens):\n    return {'model': model, 'prompt': prompt, 'max_tokens': max_tokens,"
     " 'temperature': 0, 'stream': False}\n"),
    ('plugins/module_utils/verify/smoke.py', "def t(answer):\n    return (answer or {}).get('choices', [{}])\n"),
    ('plugins/module_utils/verify/loadgen.py',
     'def body(self):\n    return {"prompt": self.prompt, "max_tokens": self.max_tokens, "stream": self.stream}\n'),
    ('plugins/module_utils/verify/loadgen.py', 'n = reply.get("usage", {}).get("completion_tokens")\n'),
    ('plugins/module_utils/verify/loadgen.py', 'done = data == b"[DONE]" or data == "[DONE]"\n'),
    ('roles/proxy/files/proxy_member.py',
     'x = post(p, dict(body, max_tokens=1, min_tokens=1, kv_transfer_params={"do_remote_decode": True}))\n'),
    ('plugins/module_utils/verify/loadgen.py', 'def f(endpoint="/v1/completions"):\n    pass\n'),
    ('plugins/module_utils/x.py', "url = 'http://%s:%d/healthcheck' % (h, p)\n"),
    ('plugins/module_utils/x.py', "CONNECTOR = 'MooncakeConnectorV1'\n"),
    ('roles/proxy/tasks/smoke.yml', "- ansible.builtin.uri:\n    url: http://{{ a }}:{{ p }}/v1/completions\n"
                                    "    body:\n      model: m\n      prompt: \"{{ x }}\"\n      max_tokens: 16\n"),
    ('roles/proxy/tasks/smoke.yml', "- x:\n    headers:\n      X-Request-Id: \"{{ id }}\"\n"),
    ('roles/proxy/tasks/main.yml', "    __t: \"{{ (r.json.choices | first).text }}\"\n"),
    ('roles/proxy/tasks/main.yml', "  url: http://{{ a }}:{{ p }}/instances/add\n"),
    ('roles/engine/vars/main.yml', "  x: \"{{ {'kv_connector': 'MooncakeConnectorV1'} }}\"\n"),
    ('roles/x/tasks/main.yml', "  b: \"{{ {'prompt': p, 'max_tokens': 1} | to_json }}\"\n"),
]


def test_the_guard_knows_the_removed_copies():
    assert [text for rel, text in KNOWN_COPIES if not findings(rel, text)] == []


def test_the_guard_leaves_options_comments_and_docs_alone():
    assert findings('roles/proxy/tasks/smoke.yml', "# X-Request-Id /v1/completions choices\n- vllm_pd.ascend.pd_smoke:\n"
                    "    model: m\n    prompt: \"{{ p }}\"\n    max_tokens: 16\n"
                    "{# /healthcheck MooncakeConnectorV1 #}\n") == []
    assert findings('plugins/modules/pd_smoke.py', '"""A docstring: X-Request-Id, /v1/completions, choices."""\n'
                    "def argument_spec():\n    return dict(model=dict(type='str'), prompt=dict(type='str'),"
                    " max_tokens=dict(type='int'))\n"
                    "s = LoadSpec(url, model=m, prompt=p, max_tokens=4)\n") == []
