"""No upstream-facing literal in roles/ or plugins/ outside the release table (plugins/module_utils/common/releases.py).

The roles read these from the table (filter pd_release_facts, newest=true), and tests/contract checks the table
against each release's source, so a contract binds the code. A literal here would escape that: this guard
fails on one in code (quoted, or part of a URL), not in a comment or a documentation string. HOST_SCRIPTS are
the sites that cannot read the table (they run without the collection); tests/contract checks each of them
against the table instead (named in the reason).
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = 'plugins/module_utils/common/releases.py'

# name: the code use of the literal (quoted, or appended to a URL or an option)
LITERALS = {
    '/instances/add': r'''(?:["']|\}\}|:\d+)/instances/add\b''',
    '/instances/remove': r'''(?:["']|\}\}|:\d+)/instances/remove\b''',
    '/healthcheck': r'''(?:["']|\}\}|:\d+)/healthcheck\b''',
    'request_num': r'''["']request_num["']|\.request_num\b''',
    'MooncakeConnectorV1': r'''["']MooncakeConnectorV1["']|kv_connector:\s*MooncakeConnectorV1|kv_connector["']?\s*[:=]\s*["']?MooncakeConnector''',
    'KV cache transfer for request': r'''(?:--grep=|search\(["']|re\.compile\(r?["'])KV cache transfer for request''',
    '--help=all': r'''["']--help=all["']''',
    'VLLM_HOST_IP': r'''^VLLM_HOST_IP=|["']VLLM_HOST_IP["']''',
}

# (path, literal): why the literal may stay there
HOST_SCRIPTS = {
    ('roles/proxy/files/proxy_member.py', '/instances/add'): 'host script; test_proxy_member_script',
    ('roles/proxy/files/proxy_member.py', '/instances/remove'): 'host script; test_proxy_member_script',
    ('roles/proxy/files/proxy_member.py', '/healthcheck'): 'host script; test_proxy_member_script',
    ('roles/proxy/files/proxy_member.py', 'request_num'): 'host script; test_proxy_member_script',
    ('plugins/module_utils/verify/bench_kv.py', 'KV cache transfer for request'):
        'the parser of the line; test_kv_log_line parses the format of every release with it',
    ('plugins/module_utils/verify/bench_vllm.py', '--help=all'): 'shipped to the bench host; test_help_lists_flags',
    ('plugins/module_utils/verify/file_sd.py', '/healthcheck'): 'Prometheus file_sd target path; test_runtime_literals',
    ('plugins/module_utils/guard/start_guard.py', 'VLLM_HOST_IP'): 'host script (the start guard); test_engine_env',
    ('plugins/module_utils/doctor/doctor_inspect.py', 'VLLM_HOST_IP'): 'read in /proc environ on the host; test_engine_env',
    ('plugins/module_utils/doctor/doctor_findings.py', 'VLLM_HOST_IP'): 'read in /proc environ on the host; test_engine_env',
    ('plugins/module_utils/doctor/doctor_host.py', 'VLLM_HOST_IP'): 'read in /proc environ on the host; test_engine_env',
    ('plugins/module_utils/doctor/doctor_report.py', 'VLLM_HOST_IP'): 'a column title of the doctor page',
    ('plugins/module_utils/inventory/inventory_rules.py', 'VLLM_HOST_IP'): 'a name users may not set; test_engine_env',
}


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


def found():
    out = []
    for top in ('roles', 'plugins'):
        for path in sorted((ROOT / top).rglob('*')):
            rel = str(path.relative_to(ROOT))
            if not path.is_file() or rel == TABLE or path.suffix not in ('.py', '.yml', '.yaml', '.j2', '.sh', ''):
                continue
            if '/meta/' in rel or rel.endswith('README.md'):
                continue
            for number, line in _code_lines(path):
                for name, pattern in LITERALS.items():
                    if re.search(pattern, line) and (rel, name) not in HOST_SCRIPTS:
                        out.append('%s:%d: %s' % (rel, number, name))
    return out


def test_no_upstream_literal_outside_the_release_table():
    assert found() == [], 'read it from the release table (pd_release_facts(newest=true)) instead'


def test_every_exception_still_holds_its_literal():
    """A listed exception whose literal is gone is stale: remove it from HOST_SCRIPTS."""
    for (rel, name) in HOST_SCRIPTS:
        text = (ROOT / rel).read_text(encoding='utf-8')
        assert re.search(LITERALS[name], text, re.M), (rel, name)


# path: the table reads each must keep (a changed or dropped read fails, whatever it was replaced with)
REQUIRED_READS = {
    'roles/engine/vars/main.yml': ['kv_connector: "{{ __engine_upstream.connector }}"',
                                   '__engine_upstream: "{{ engine_vllm_ascend_version | default(\'\') '
                                   '| vllm_pd.ascend.pd_release_facts(newest=true) }}"'],
    'roles/engine/tasks/files.yml': ['__engine_help_argv + [__engine_upstream.cli_lists_flags]'],
    'roles/engine/templates/vllm-pd.env.j2': ['{{ __engine_upstream.host_ip_env }}={{ engine_address.address }}'],
    'roles/proxy/tasks/members.yml': ['{{ __proxy_url }}{{ __proxy_upstream.proxy_add_route }}"'],
    'roles/proxy/tasks/members_add.yml': ['{{ __proxy_url }}{{ __proxy_upstream.proxy_add_route }}"'] * 2,
    'roles/proxy/tasks/members_remove.yml': ['{{ __proxy_url }}{{ __proxy_upstream.proxy_remove_route }}"'],
    'roles/proxy/tasks/inspect.yml': ['{{ __proxy_url }}{{ __proxy_upstream.proxy_add_route }}"'],
    'roles/proxy/tasks/admin_api.yml': ['[__proxy_upstream.proxy_add_route, __proxy_upstream.proxy_remove_route]'],
    'roles/proxy/tasks/main.yml': [':{{ proxy_port }}{{ __proxy_upstream.proxy_health_route }}'],
    'roles/proxy/tasks/smoke.yml': ["is search(__proxy_upstream.kv_log_grep ~ ' [^ ]+ took')"],
    'roles/preflight/tasks/host.yml': ['{{ vllm_pd_proxy_port | default(8000) }}{{ __upstream.proxy_add_route }}',
                                       '[__upstream.proxy_add_route, __upstream.proxy_remove_route]'],
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
