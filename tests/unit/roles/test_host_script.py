# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""filter pd_host_script: the scripts the roles pass to `python3 -c` carry the module_utils they import (the env
file reader, the Prometheus parser), so they run where the collection is not installed. Each program runs here
in an isolated interpreter (-I: no PYTHONPATH, no current directory), as on a host."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import subprocess
import sys

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_pd.ascend.plugins.filter.pd_host_script import pd_host_script

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
PYTHON = '/usr/bin/python3' if os.access('/usr/bin/python3', os.X_OK) else sys.executable


def program(rel):
    with open(os.path.join(ROOT, rel), encoding='utf-8') as f:
        return pd_host_script(f.read())


def run(rel, *args):
    r = subprocess.run([PYTHON, '-I', '-c', program(rel)] + list(args), capture_output=True, text=True, timeout=60,
                       cwd='/', check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture
def server(http_server):
    answers = {}

    def respond(path, headers):
        want = answers.get('key')
        if path.startswith('/v1') and want and headers.get('Authorization') != 'Bearer ' + want:
            return 401, '{}'
        return answers.get(path, (404, '{}'))

    return answers, http_server(respond)


def test_every_script_the_roles_run_compiles_with_what_it_imports():
    for path in sorted(glob.glob(os.path.join(ROOT, 'roles', '*', 'files', '*.py'))):
        rel = os.path.relpath(path, ROOT)
        compile(program(rel), rel, 'exec')
        # the argument limit of one word on Linux (MAX_ARG_STRLEN, 128 KiB)
        assert len(program(rel).encode('utf-8')) < 128 * 1024, rel


def test_without_the_filter_a_host_cannot_import_the_parsers():
    with open(os.path.join(ROOT, 'roles/engine/files/probe_drained.py'), encoding='utf-8') as f:
        r = subprocess.run([PYTHON, '-I', '-c', f.read()], capture_output=True, text=True, timeout=60, cwd='/', check=False)
    assert r.returncode != 0 and 'ansible_collections' in r.stderr


def test_probe_ready_reads_the_api_key_of_a_quoted_env_file_on_a_host(server, tmp_path):
    answers, base = server
    key = 'sk "x" $y \\z'
    answers.update({'key': key, '/health': (200, ''), '/v1/models': (200, '{"data": [{"id": "m"}]}')})
    env = tmp_path / 'e.env'
    env.write_text('# managed\nexport VLLM_API_KEY=wrong\nVLLM_API_KEY="sk \\"x\\" \\$y \\\\z"\n')
    assert run('roles/engine/files/probe_ready.py', 'u.service', base + '/health', '5', base + '/v1/models', str(env)) == 'ready'
    env.write_text('VLLM_API_KEY=other\n')
    out = run('roles/engine/files/probe_ready.py', 'u.service', base + '/health', '5', base + '/v1/models', str(env))
    assert out.startswith('unlisted: GET %s/v1/models answered HTTP 401' % base), out


def test_probe_drained_reads_the_gauges_on_a_host(server):
    answers, base = server
    answers['/metrics'] = (200, '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 0.0\n'
                                'vllm:num_requests_waiting{engine="0",model_name="a \\"b\\", c"} 0.0\n')
    assert run('roles/engine/files/probe_drained.py', 'decode', base + '/metrics', '1') == 'drained'
    answers['/metrics'] = (200, 'vllm:num_requests_running{engine="0"} 1.0\nvllm:num_requests_running{engine="1"} 2.0\n')
    assert run('roles/engine/files/probe_drained.py', 'decode', base + '/metrics', '0.2').startswith('busy')
    answers['/metrics'] = (200, 'vllm:num_requests_running{engine="0"} zero\n')
    assert run('roles/engine/files/probe_drained.py', 'decode', base + '/metrics', '0.2').startswith('gone')


def test_proxy_member_runs_on_a_host():
    assert run('roles/proxy/files/proxy_member.py', 'routes', 'http://127.0.0.1:9') == '{"admin": null}'


def test_a_script_that_imports_nothing_of_the_collection_is_unchanged():
    assert pd_host_script('import sys\nprint(sys.argv)\n') == 'import sys\nprint(sys.argv)\n'


def test_an_import_of_no_module_utils_file_is_an_error():
    with pytest.raises(AnsibleFilterError, match='pd_host_script: .*common.nothing'):
        pd_host_script('from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.nothing import x\n')
