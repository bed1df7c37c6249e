"""Every request the roles send to the example proxy's admin API builds its JSON body from the release table's keys
(proxy_admin_request, which tests/contract checks against each release's proxy): a body is the proxy role's
__proxy_admin_read, or a dict whose keys are the table's kind and members keys. A literal key ('type: prefill',
'instances': ...) fails here, since those words are too common for the literal guard to look for by value."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
ADMIN_ROUTE = re.compile(r'proxy_(add|remove)_route')
# a dict built from the table: {<table>.kind: ..., <table>.members: ...}
TABLE_BODY = re.compile(r'''^\{\{ \{(__upstream\.proxy_admin_request|__proxy_admin_keys)\.kind: [^,]+, \1\.members: [^}]+\} \}\}$''')


def admin_bodies():
    """(file, task name, body) of every ansible.builtin.uri task of roles/ that calls an admin route."""
    out = []
    for path in sorted((ROOT / 'roles').glob('*/tasks/*.yml')):
        for task in yaml.safe_load(path.read_text(encoding='utf-8')) or []:
            uri = task.get('ansible.builtin.uri') if isinstance(task, dict) else None
            if uri and ADMIN_ROUTE.search(str(uri.get('url', ''))):
                out.append((str(path.relative_to(ROOT)), task.get('name'), uri.get('body')))
    return out


def test_the_scan_finds_the_admin_calls():
    files = {f for f, _name, _body in admin_bodies()}
    assert {'roles/preflight/tasks/host.yml', 'roles/proxy/tasks/members_add.yml',
            'roles/proxy/tasks/members_remove.yml', 'roles/proxy/tasks/inspect.yml'} <= files


def test_every_admin_body_is_built_from_the_table():
    proxy_vars = yaml.safe_load((ROOT / 'roles/proxy/vars/main.yml').read_text(encoding='utf-8'))
    assert proxy_vars['__proxy_admin_keys'] == '{{ __proxy_upstream.proxy_admin_request }}'
    assert TABLE_BODY.match(proxy_vars['__proxy_admin_read']), proxy_vars['__proxy_admin_read']
    literal = [(f, name, body) for f, name, body in admin_bodies()
               if body != '{{ __proxy_admin_read }}' and not (isinstance(body, str) and TABLE_BODY.match(body))]
    assert literal == [], 'build the body from the release table (__proxy_admin_read or proxy_admin_request keys)'
