"""No upstream-facing literal in roles/ or plugins/ outside the release table (plugins/module_utils/common/releases.py).

The roles read these from the table (filter pd_release_facts, newest=true), and tests/contract checks the table
against each release's source, so a contract binds the code. A literal here would escape that: this guard
fails on one in code (quoted, part of a URL, an env file line or a YAML value), not in a comment or a
documentation string, and names the table key to read instead.

It knows kinds of literals, not a list of them (CLASSES):
  table    every string value of the table's upstream-facing keys (UPSTREAM_KEYS), in every release;
  flag     a quoted `--option` (or one in a YAML flow list): vLLM's, the proxy's and `vllm bench serve`'s options;
  metric   a `vllm:` metric name;
  env      a variable name of vLLM, vllm-ascend, CANN, torch, Mooncake or the example proxy (VLLM_, HCCL_, ASCEND_,
           GLOO_, TP_SOCKET_, MC_, OPENAI_): quoted, or the name of an env file line.
ALLOWED lists what may stay, each with why: options of other programs (OTHER_PROGRAMS: systemctl, journalctl, the
container engine), and sites that cannot read the table at run time, that a contract reads directly, or messages.
"""
import re
from pathlib import Path

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases

ROOT = Path(__file__).resolve().parents[2]
TABLE = 'plugins/module_utils/common/releases.py'

# The keys of a release whose values are what the code sends to, or reads from, upstream.
UPSTREAM_KEYS = ('connector', 'connector_module', 'host_ip_env', 'proxy_flags', 'proxy_routes', 'proxy_health_route',
                 'proxy_add_route', 'proxy_remove_route', 'proxy_count_key', 'proxy_wait_flags', 'cli_lists_flags', 'kv_log_grep',
                 'metrics', 'serve_flags', 'kv_config_keys', 'kv_roles', 'engine_env_names', 'engine_routes',
                 'abort_env', 'dense_dp_keeps_rank', 'window_env', 'pd_match_env', 'intra_roce_env', 'api_key_env',
                 'log_path_env', 'transfer_timeout_env', 'metric_names', 'serve_aliases', 'bench_flags', 'proxy_admin_answer',
                 'request_id_header', 'proxy_api_key_env', 'wheel_proxy_module', 'proxy_member_counts',
                 'served_counter')


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def table_values():
    """{value: 'releases.KEY[.SUBKEY]'} of every string of UPSTREAM_KEYS in every release."""
    out = {}
    for entry in releases.RELEASES.values():
        for key in UPSTREAM_KEYS:
            value = entry.get(key)
            if isinstance(value, dict):
                for sub, v in value.items():
                    for s in _strings(v):
                        out.setdefault(s, '%s.%s' % (key, sub))
            else:
                for v in _strings(value):
                    out.setdefault(v, key)
    return out


def _use(value):
    """The code use of VALUE: quoted, appended to a URL ('}}/route', ':8000/route'), an env file line (NAME=), a
    YAML value (key: VALUE), for a snake_case key an attribute (.key) or, for a phrase (a log line), anywhere."""
    v = re.escape(value)
    if ' ' in value:
        return v
    pattern = r'''["']%s["']|^%s=|:\s+%s\s*$''' % (v, v, v)
    if value.startswith('/'):
        pattern += r'''|(?:\}\}|:\d+|["'])%s(?![\w/-])''' % v
    if value.startswith('--'):
        pattern += r'''|[\[,]\s*%s(?=[=,\]\s])''' % v
    if re.fullmatch(r'[a-z]+(?:_[a-z]+)+', value):  # a key read as an attribute (Jinja: answer.json.KEY)
        pattern += r'''|\.%s\b''' % v
    return pattern


# the literal of each class, and its code use (the group is the literal)
NAMES = {'flag': r'--[a-z][a-z0-9-]+(?:=[a-z]+)?', 'metric': r'vllm:[a-z][a-z0-9_]+',
         'env': r'(?:VLLM|HCCL|ASCEND|GLOO|TP_SOCKET|MC|OPENAI)_[A-Z0-9_]+'}
CLASSES = {
    'flag': (r'''(?:["']|[\[,]\s*)(--[a-z][a-z0-9-]+)(?=[=,\]\s"'])''',
             'serve_flags (vllm serve), bench_flags (vllm bench serve), proxy_flags (the proxy), cli_lists_flags'),
    'metric': (r'(%s)' % NAMES['metric'], 'metrics'),
    'env': (r'''(?:["']|^)(%s)(?:["']|=)''' % NAMES['env'], 'host_ip_env, engine_env_names, abort_env'),
}

# Where a literal may stay, and why: "path or path prefix | class or 'class literal' | why", one a line (an empty
# path: everywhere; an empty class: any literal).
OTHER_PROGRAMS = ('--no-pager --rm --name --env-file --entrypoint --format --all --full --no-legend --restart --runtime '
                  '--grep --unit --quiet --show-cursor --property --value --plain --type --state --volume --device '
                  '--shm-size --ulimit --mount --net --lines --output --since --after-cursor --now')
_ALLOWED = """
 | name kv_port | also the collection's name of an instance's base port (plan, options); the rendered key is kv_config_keys.port
 | flag --help | argparse's own option (every release; the release's listing option is cli_lists_flags)
plugins/module_utils/doctor/doctor_launch.py | name kv_role | a key of its own result (the one it reads is kv_config_keys.role)
plugins/module_utils/inventory/rules_cluster.py | name kv_connector_extra_config | a message names it
plugins/module_utils/inventory/rules_state.py | flag --limit | ansible-playbook's option, which rule_limit names
plugins/module_utils/verify/bench_gate.py | line | a message names the line
plugins/module_utils/verify/port_listening.py | env VLLM_HOST_IP | a message names it
plugins/module_utils/common/check_names.py | env | a check's description names them
plugins/modules/pd_bench.py | route /v1/completions | the default of its endpoint option (users may change it)
plugins/module_utils/common/proxy_front.py | route /metrics | the path of HAProxy's own Prometheus exporter, not vLLM's route
"""
ALLOWED = dict(((where.strip(), what.strip()), why.strip())
               for where, what, why in (line.split('|', 2) for line in _ALLOWED.strip('\n').split('\n')))
ALLOWED.update((('', 'flag ' + flag), 'an option of systemctl, journalctl, npu-smi or the container engine, not of upstream')
               for flag in OTHER_PROGRAMS.split())


def _code_lines(path):
    """(number, line) of PATH without comment lines and, for Python, without docstrings/DOCUMENTATION blocks."""
    text = path.read_text(encoding='utf-8', errors='replace')
    doc = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if path.suffix == '.py' and stripped.count('"""') % 2 == 1 or path.suffix == '.py' and stripped.count("'''") % 2 == 1:
            doc = not doc
            continue
        if doc or stripped.startswith(('#', '{#')):
            continue
        yield number, line


def _files():
    for top in ('roles', 'plugins'):
        for path in sorted((ROOT / top).rglob('*')):
            rel = str(path.relative_to(ROOT))
            if not path.is_file() or rel == TABLE or path.suffix not in ('.py', '.yml', '.yaml', '.j2', '.sh', ''):
                continue
            if '/meta/' in rel or rel.endswith('README.md'):
                continue
            yield rel, path


def _allowances(rel, kind, literal):
    """The keys of ALLOWED that let LITERAL of KIND stay in REL."""
    return [(where, what) for where, what in ALLOWED if rel.startswith(where) and what in ('', kind, '%s %s' % (kind, literal))]


def kind_of(value):
    """The class of a table value: flag, metric, env, route, line (a log line) or name (a key or module name)."""
    for kind, pattern in NAMES.items():
        if re.fullmatch(pattern, value):
            return kind
    return 'route' if value.startswith('/') else 'line' if ' ' in value else 'name'


def hits():
    """[(rel, line number, kind, literal, table key)] of every upstream literal in code lines, allowed or not."""
    values = [(v, key, re.compile(_use(v))) for v, key in sorted(table_values().items())]
    classes = [(kind, re.compile(pattern), key) for kind, (pattern, key) in CLASSES.items()]
    out = []
    for rel, path in _files():
        for number, line in _code_lines(path):
            seen = set()
            for value, key, pattern in values:
                if pattern.search(line):
                    seen.add(value)
                    out.append((rel, number, kind_of(value), value, 'releases %s' % key))
            for kind, pattern, key in classes:
                for literal in pattern.findall(line):
                    if literal not in seen:
                        out.append((rel, number, kind, literal, 'releases %s' % key))
    return out


def found():
    return ['%s:%d: %s %r (read the table: %s)' % (rel, n, kind, literal, key)
            for rel, n, kind, literal, key in hits() if not _allowances(rel, kind, literal)]


def test_no_upstream_literal_outside_the_release_table():
    assert found() == [], 'read it from the release table (pd_release_facts(newest=true)) instead, or pass it ' \
                          'to the host script'


def test_every_allowance_is_used():
    """An allowance no literal needs is stale: remove it from ALLOWED."""
    used = set()
    for rel, _n, kind, literal, _key in hits():
        used.update(_allowances(rel, kind, literal))
    assert sorted(set(ALLOWED) - used) == []


@pytest.mark.parametrize('line, kind', [
    ("  engine_kv_role: kv_producer", 'table'), ("argv: ['vllm', 'serve', '--tensor-parallel-size', '2']", 'table'),
    ("url: http://{{ h }}:{{ p }}/metrics", 'table'), ("HCCL_IF_IP={{ a }}", 'table'),
    ("x = ['--enforce-eager']", 'flag'), ("G = ('vllm:gpu_cache_usage_perc',)", 'metric'),
    ("NCCL = 'VLLM_USE_V1'", 'env'), ("HCCL_BUFFSIZE={{ b }}", 'env'),
])
def test_each_class_is_caught(tmp_path, line, kind):
    """The guard's patterns on one line of each kind (a rename of a pattern that catches nothing fails here)."""
    path = tmp_path / 'x.yml'
    path.write_text(line + '\n')
    values = [re.compile(_use(v)) for v in table_values()]
    lines = [text for _n, text in _code_lines(path)]
    if kind == 'table':
        assert any(p.search(lines[0]) for p in values)
    else:
        assert re.findall(CLASSES[kind][0], lines[0])


# path: the table reads each must keep (a changed or dropped read fails, whatever it was replaced with)
REQUIRED_READS = {
    'roles/engine/vars/main.yml': ['(__engine_kv_keys.connector, __engine_upstream.connector)',
                                   '__engine_upstream: "{{ engine_vllm_ascend_version | default(\'\') '
                                   '| vllm_pd.ascend.pd_release_facts(newest=true) }}"',
                                   '| vllm_pd.ascend.pd_serve_has_shutdown_timeout }}"'],
    # the help is read only for a release the table does not answer for (vars/main.yml: the table's shutdown_timeout)
    'roles/engine/tasks/help.yml': ['__engine_help_argv + [__engine_upstream.cli_lists_flags]'],
    # the kv_role of the kind served (the prefill and decode roles pass engine_kind)
    'roles/engine/tasks/serve.yml': ['engine_kv_role: "{{ __engine_upstream.kv_roles[engine_kind] }}"'],
    'roles/engine/templates/vllm-pd.env.j2': ['{{ __engine_upstream.host_ip_env }}={{ engine_address.address }}'],
    'roles/proxy/tasks/members_add.yml': ['{{ __proxy_url }}{{ __proxy_upstream.proxy_add_route }}"'] * 2,
    'roles/proxy/tasks/members_remove.yml': ['{{ __proxy_url }}{{ __proxy_upstream.proxy_remove_route }}"'],
    'roles/proxy/tasks/inspect.yml': ['{{ __proxy_url }}{{ __proxy_upstream.proxy_add_route }}"'],
    # whether the proxy has the admin API: its routes (the proxy role's one read of the proxy, proxy_member.py state)
    'roles/proxy/files/proxy_member.py': ['return ADMIN["add"] in paths and ADMIN["remove"] in paths'],
    'roles/proxy/tasks/main.yml': [':{{ proxy_port }}{{ __proxy_upstream.proxy_health_route }}'],
    'roles/proxy/tasks/smoke.yml': ["is search(__proxy_upstream.kv_log_grep ~ ' [^ ]+ took')"],
    'roles/preflight/tasks/host.yml': ['{{ vllm_pd_proxy_port | default(8000) }}{{ __upstream.proxy_add_route }}'],
    'roles/preflight/tasks/rolling.yml': ['[__upstream.proxy_add_route, __upstream.proxy_remove_route]'],
    'roles/doctor/tasks/observe.yml': ["'--grep=' ~ __doctor_upstream.kv_log_grep"],
    'roles/benchmark/tasks/main.yml': ["'--grep=' ~ __benchmark_upstream.kv_log_grep"],
}
for _role in ('proxy', 'doctor', 'benchmark'):
    REQUIRED_READS['roles/%s/vars/main.yml' % _role] = [
        '__%s_upstream: "{{ vllm_pd_vllm_ascend_version | default(\'\') | vllm_pd.ascend.pd_release_facts(newest=true) }}"' % _role]


def test_the_roles_read_the_table_where_they_talk_to_upstream():
    missing = []
    for rel, reads in sorted(REQUIRED_READS.items()):
        text = (ROOT / rel).read_text(encoding='utf-8')
        for read in set(reads):
            if text.count(read) != reads.count(read):
                missing.append('%s: %d x %s' % (rel, reads.count(read), read))
    assert missing == []
