# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets: which names are secret, the API key read back from an env file exactly as pd_systemd_env
wrote it (by the module_utils reader and by the two scripts that run alone on the hosts), the
inventory rule that refuses P and D with different keys without showing either, and the preflight's
planned environment that hides secret values."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import random
import re
import string
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from conftest import load_script

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_redact_env import pd_redact_env
from ansible_collections.vllm_pd.ascend.plugins.filter.pd_systemd_env import pd_systemd_env
from ansible_collections.vllm_pd.ascend.plugins.modules import pd_smoke
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import secrets
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import inventory_rules as ir
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import unit_ready
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen

PROBE = load_script('roles/engine/files/probe_ready.py')
MEMBER = load_script('roles/proxy/files/proxy_member.py')
# the scripts import the module_utils reader (on a host: filter pd_host_script, tests/unit/roles/test_host_script.py)
READERS = [('module_utils', secrets.api_key_of_file), ('probe_ready.py', PROBE.api_key_of_file),
           ('proxy_member.py', MEMBER.api_key_of_file)]


def test_the_scripts_share_the_module_utils_reader():
    assert PROBE.api_key_of_file is MEMBER.api_key_of_file is secrets.api_key_of_file


@pytest.mark.parametrize('name', ['VLLM_API_KEY', 'OPENAI_API_KEY', 'HF_TOKEN', 'hf_token', 'AWS_SECRET',
                                  'DB_PASSWORD', 'PASSWORD_FILE', 'MY_PASSWORD_X'])
def test_default_secret_names(name):
    assert secrets.is_secret(name)


@pytest.mark.parametrize('name', ['HF_HUB_OFFLINE', 'HCCL_RDMA_TIMEOUT', 'KEYS', 'VLLM_LAB_STARTUP_DELAY', 'TOKENIZERS'])
def test_other_names_are_not_secret(name):
    assert not secrets.is_secret(name)


def test_the_operator_adds_names_and_patterns():
    assert secrets.is_secret('MY_CREDS', ['MY_CREDS']) and secrets.is_secret('SITE_CERT', ['*_cert'])
    assert not secrets.is_secret('MY_CREDS', ['OTHER'])


def test_redact_hides_secret_values_only():
    env = {'HF_TOKEN': 'hf_x', 'VLLM_API_KEY': 'sk', 'MY_CREDS': 'c', 'HCCL_RDMA_TIMEOUT': '18'}
    assert pd_redact_env(env, ['MY_CREDS']) == {'HF_TOKEN': '<hidden>', 'VLLM_API_KEY': '<hidden>',
                                                'MY_CREDS': '<hidden>', 'HCCL_RDMA_TIMEOUT': '18'}
    assert env['HF_TOKEN'] == 'hf_x'  # a copy


def _words(seed, count=300):
    rnd = random.Random(seed)
    alphabet = string.printable.replace('\n', '').replace('\r', '').replace('\x0b', '').replace('\x0c', '')
    return [''.join(rnd.choice(alphabet) for _char in range(rnd.randint(1, 24))) for _value in range(count)] + [
        ' lead', 'trail ', '"quoted"', "'single", 'back\\slash', '$HOME', '`cmd`', 'a=b', '#notacomment']


@pytest.mark.parametrize('where, read', READERS)
def test_every_key_reads_back_as_pd_systemd_env_wrote_it(tmp_path, where, read):
    path = tmp_path / 'x.env'
    for i, key in enumerate(_words(31)):
        path.write_text('# comment\nVLLM_HOST_IP=10.0.0.1\n%s\n' % pd_systemd_env({'VLLM_API_KEY': key, 'A_B': 'x'}))
        assert read(str(path)) == key, (where, key)


@pytest.mark.parametrize('where, read', READERS)
def test_proxy_key_name_and_no_key(tmp_path, where, read):
    path = tmp_path / 'proxy.env'
    path.write_text(pd_systemd_env({'OPENAI_API_KEY': 'sk-p'}) + '\n')
    assert read(str(path)) == 'sk-p'
    path.write_text('# no key\nHF_HUB_OFFLINE=1\n')
    assert read(str(path)) == ''
    assert read(str(tmp_path / 'missing.env')) == ''


def view(p_env=None, d_env=None, d_var='vllm_pd_engine_env', d2_env=None):
    base = dict(vllm_pd_cluster='a', vllm_pd_network='10.0.0.0/24', vllm_pd_model='m', vllm_pd_kv_port=30000,
                vllm_pd_prefill_tp_size=2, vllm_pd_decode_tp_size=2)
    hosts = {'p1': dict(base), 'd1': dict(base), 'd2': dict(base)}
    if p_env is not None:
        hosts['p1']['vllm_pd_engine_env'] = p_env
    if d_env is not None:
        hosts['d1'][d_var] = d_env
    if d2_env is not None:
        hosts['d2']['vllm_pd_engine_env'] = d2_env
    return {'groups': {'vllm_pd_prefill': ['p1'], 'vllm_pd_decode': ['d1', 'd2'], 'vllm_pd_proxy': ['p1'],
                       'cluster_a': ['p1', 'd1', 'd2']}, 'hosts': hosts}


def test_the_same_key_everywhere_or_none_is_fine():
    assert ir.inventory_errors(view()) == []
    k = {'VLLM_API_KEY': 'sk-same'}
    assert ir.inventory_errors(view(k, k, d2_env=k)) == []
    assert ir.inventory_errors(view(k, k, 'decode_env', d2_env=k)) == []


def test_keys_that_differ_are_refused_by_host_and_variable_never_by_value():
    errors = ir.inventory_errors(view({'VLLM_API_KEY': 'sk-secret-p'}, {'VLLM_API_KEY': 'sk-secret-d'}, 'decode_env'))
    [f] = errors
    assert (f['cluster'], f['variable']) == ('a', 'vllm_pd_engine_env')
    assert 'key A on p1 (prefill, vllm_pd_engine_env)' in f['text']
    assert 'key B on d1 (decode, decode_env)' in f['text'] and 'unset on d2 (decode, vllm_pd_engine_env)' in f['text']
    assert 'Fix: set VLLM_API_KEY once for the cluster' in f['text']
    assert 'sk-secret' not in json.dumps(errors)


def test_a_key_on_one_side_only_is_refused():
    [f] = ir.inventory_errors(view(None, {'VLLM_API_KEY': 'sk-d'}, d2_env={'VLLM_API_KEY': 'sk-d'}))
    assert 'unset on p1 (prefill, vllm_pd_engine_env); key A on d1 (decode, vllm_pd_engine_env), d2' in f['text']


def test_secret_env_names_must_be_a_list_of_strings():
    data = view()
    data['hosts']['p1']['vllm_pd_secret_env_names'] = 'MY_CREDS'
    [f] = ir.inventory_errors(data)
    assert (f['host'], f['variable']) == ('p1', 'vllm_pd_secret_env_names')
    data['hosts']['p1']['vllm_pd_secret_env_names'] = ['MY_CREDS', '*_CERT']
    assert ir.inventory_errors(data) == []


@pytest.fixture
def server():
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers['Content-Length']))
            seen.append(self.headers.get('Authorization'))
            ok = self.headers.get('Authorization') == 'Bearer sk-load'
            body = (b'data: {"choices": [{"text": " a"}]}\n\ndata: [DONE]\n\n' if ok else b'{"error": "Unauthorized"}')
            self.send_response(200 if ok else 401)
            self.send_header('Content-Type', 'text/event-stream' if ok else 'application/json')
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = HTTPServer(('127.0.0.1', 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield seen, 'http://127.0.0.1:%d' % httpd.server_address[1]
    httpd.shutdown()


def test_the_load_generator_carries_the_key(server):
    seen, url = server
    ok = loadgen.send_one(loadgen.LoadSpec(url, count=1, rate=1, api_key='sk-load'))
    refused = loadgen.send_one(loadgen.LoadSpec(url, count=1, rate=1))
    assert ok['error'] is None and seen[0] == 'Bearer sk-load'
    assert seen[1] is None and 'HTTP 401' in refused['error']


def test_the_ready_poll_sends_the_key_to_models_only_when_it_has_one():
    sent = []

    def get(url, headers, timeout):
        sent.append(headers.get('Authorization'))
        return 200, '{"data": [{"id": "m"}]}'

    assert unit_ready.models_problem('http://127.0.0.1:1/v1/models', 'sk-m', get) is None
    assert unit_ready.models_problem('http://127.0.0.1:1/v1/models', '', get) is None
    assert sent == ['Bearer sk-m', None]


# Every place a role or playbook reads the engine environment or the API key, and why it shows nothing: a new
# reference must be added here after checking that no result, fact, message or diff can carry a value.
SECRET_READS = {
    'roles/engine/templates/vllm-pd.env.j2': 'the env file, written by file_set (content is no_log)',
    'roles/engine/tasks/serve.yml': 'engine_env passed to include_tasks (vars are not shown), read by the kind\'s '
                                    'prefix; the settings of __engine_setting_names are no secrets (names, sizes)',
    'roles/prefill/defaults/main.yml': 'the role default',
    'roles/decode/defaults/main.yml': 'the role default',
    'roles/preflight/vars/main.yml': "the port windows of the prefill env (pd_port_windows: numbers)",
    'roles/preflight/tasks/changes.yml': "the log prune's directories: one path variable of it (the table's log_path_env)",
    'roles/proxy/vars/main.yml': '__proxy_api_key, the key alone',
    'roles/proxy/templates/vllm-pd-proxy.env.j2': 'the proxy env file, written by file_set (content is no_log)',
    'roles/proxy/tasks/smoke.yml': "the smoke's requests: pd_smoke's api_key is no_log",
    'roles/engine/tasks/instances.yml': 'pd_dense_keeps_rank reads one variable of it into a boolean',
}
JINJA = re.compile(r'\{\{.*?\}\}|\{%.*?%\}', re.S)
# (a role's variable read by its kind's prefix: engine_kind ~ '_env')
READ = re.compile(r"\b(vllm_pd_engine_env|prefill_env|decode_env|engine_env|__engine_setting_names|__proxy_api_key"
                  r"|VLLM_API_KEY|OPENAI_API_KEY)\b|~ '_env'")


def test_the_engine_environment_and_the_key_are_read_only_where_nothing_shows_them():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    found = {}
    for top in ('roles', 'playbooks'):
        for dirpath, _dirs, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith(('.yml', '.j2')) or name == 'argument_specs.yml':
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                # what Jinja evaluates (prose in messages and comments reads nothing)
                for expr in JINJA.findall(open(path).read()):
                    if READ.search(expr):
                        found.setdefault(rel, []).append(' '.join(expr.split())[:120])
    unexpected = dict((k, v) for k, v in found.items() if k not in SECRET_READS)
    assert unexpected == {}, unexpected
    # the smoke's requests carry the key only as pd_smoke's api_key, a no_log option (no task argument holds a header)
    smoke = open(os.path.join(root, 'roles/proxy/tasks/smoke.yml')).read()
    assert 'headers:' not in smoke and smoke.count('api_key: "{{ __proxy_api_key }}"') == 1
    assert pd_smoke.argument_spec()['api_key']['no_log'] is True
