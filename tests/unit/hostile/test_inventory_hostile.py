# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile inventory values (issue 13): each row overrides one healthy cluster and must get a named
error (variable, host or cluster, fix) from the preflight's validation, or render a unit and env file
that systemd reads back as exactly the argv and the environment the inventory gave.

One ansible-playbook run (tests/unit/roles/render.yml, controller only) validates every row, each in
a cluster of its own, and renders the engine files of the rows that must be safe. The unit's
ExecStart= and the env file are parsed back with parsers written here from systemd.service(5),
systemd.syntax(7) and systemd.exec(5), independent of the code that writes them; where the machine
has systemd-analyze, `systemd-analyze verify` loads every rendered unit too.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import grp
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
RENDER = os.path.join(REPO_ROOT, 'tests', 'unit', 'roles', 'render.yml')
COLLECTIONS_ROOT = next(p for p in sys.path if os.path.isdir(os.path.join(p, 'ansible_collections', 'vllm_pd', 'ascend')))


# ------------------------------------------------------------------ systemd's parsers, from the man pages

C_ESCAPES = {'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v', 's': ' ',
             '\\': '\\', '"': '"', "'": "'"}


def _c_escape(text, i):
    """The character of the C escape at text[i] (just after the backslash), and the next index."""
    c = text[i]
    if c in C_ESCAPES:
        return C_ESCAPES[c], i + 1
    if c == 'x':
        return chr(int(text[i + 1:i + 3], 16)), i + 3
    if c in 'uU':
        n = 4 if c == 'u' else 8
        return chr(int(text[i + 1:i + 1 + n], 16)), i + 1 + n
    if c in '01234567':
        return chr(int(text[i:i + 3], 8)), i + 3
    raise AssertionError('unknown escape \\%s: systemd warns and ignores it' % c)


def split_exec(line):
    """ExecStart= value -> argv as the process gets it: words split on unquoted whitespace, quotes
    removed with C escapes, a lone unquoted ';' a second command (refused here), then per word the
    '%' specifiers and the '$' substitution systemd applies (anything but '%%' and '$$' is refused:
    it would change the argv)."""
    words, i, n = [], 0, len(line)
    while True:
        while i < n and line[i] in ' \t':
            i += 1
        if i >= n:
            break
        if line[i] == ';' and (i + 1 == n or line[i + 1] in ' \t'):
            raise AssertionError('unquoted ";" starts a second command: %r' % line)
        word, quote = '', None
        while i < n:
            c = line[i]
            if quote:
                if c == quote:
                    quote = None
                    i += 1
                    if i < n and line[i] not in ' \t':
                        raise AssertionError('a closing quote must end the word: %r' % line[i:])
                    break
                if c == '\\':
                    ch, i = _c_escape(line, i + 1)
                    word += ch
                    continue
                word += c
                i += 1
            elif c in '"\'' and word == '':
                quote = c
                i += 1
            elif c in ' \t':
                break
            elif c == '\\':
                ch, i = _c_escape(line, i + 1)
                word += ch
            else:
                word += c
                i += 1
        assert quote is None, 'unterminated quote in %r' % line
        words.append(word)
    out = []
    for w in words:
        w = re.sub(r'%(.)', lambda m: '%' if m.group(1) == '%' else _refuse('specifier %' + m.group(1), w), w)
        if w.startswith('$') and w[1:2] not in ('{', '$'):
            _refuse('a whole-word $VAR is split into words', w)
        w = re.sub(r'\$(.|$)', lambda m: '$' if m.group(1) == '$' else _refuse('$ substitution', w), w)
        out.append(w)
    return out


def _refuse(what, word):
    raise AssertionError('%s would change the word %r' % (what, word))


def parse_env_file(text):
    """EnvironmentFile= as systemd.exec(5) reads it: comments (# ;) and blank lines skipped; an unquoted
    value keeps interior blanks, loses the ones at its ends, '\\X' gives X; '...' is verbatim; "..."
    gives X for '\\X' when X is one of " \\ ` $, keeps both characters otherwise."""
    env, i, n = {}, 0, len(text)
    while i < n:
        while i < n and text[i] in ' \t\r\n':
            i += 1
        if i >= n:
            break
        if text[i] in '#;':
            i = text.find('\n', i) if '\n' in text[i:] else n
            continue
        eq = text.find('=', i)
        nl = text.find('\n', i) if '\n' in text[i:] else n
        if eq < 0 or eq > nl:
            i = nl
            continue
        key = text[i:eq].strip(' \t')
        i = eq + 1
        while i < n and text[i] in ' \t':
            i += 1
        value, trailing = '', 0
        while i < n and text[i] != '\n':
            c = text[i]
            if c == "'" and value == '':
                end = text.index("'", i + 1)
                value, i = text[i + 1:end], end + 1
                trailing = 0
                continue
            if c == '"' and value == '':
                i += 1
                while text[i] != '"':
                    if text[i] == '\\':
                        nxt = text[i + 1]
                        if nxt in '"\\`$':
                            value += nxt
                        elif nxt == '\n':
                            pass
                        else:
                            value += '\\' + nxt
                        i += 2
                        continue
                    value += text[i]
                    i += 1
                i += 1
                trailing = 0
                continue
            if c == '\\':
                value += text[i + 1]
                i += 2
                trailing = 0
                continue
            value += c
            trailing = trailing + 1 if c in ' \t\r' else 0
            i += 1
        env[key] = value[:len(value) - trailing] if trailing else value
    return env


def test_the_parsers_are_the_man_pages(tmp_path):
    """The parsers themselves, on lines written by hand from the man pages' own examples."""
    assert split_exec('/bin/echo "one two" three\\sfour "a\\"b" %% "x$$y"') == [
        '/bin/echo', 'one two', 'three four', 'a"b', '%', 'x$y']
    for bad in ('/bin/echo 100%Z', '/bin/echo $HOME', '/bin/echo "${A}"', '/bin/echo a ; /bin/true'):
        with pytest.raises(AssertionError):
            split_exec(bad)
    assert parse_env_file('# c\n; c\nA=1\nB = two words  \nC="x \\"y\\" \\q"\nD=\'v\\w\'\nE=\\ a\n') == {
        'A': '1', 'B': 'two words', 'C': 'x "y" \\q', 'D': 'v\\w', 'E': ' a'}


# ------------------------------------------------------------------ the matrix

BASE = dict(vllm_pd_network='10.0.30.0/24', vllm_pd_model='/data/models/m', vllm_pd_kv_port=30000,
            vllm_pd_prefill_tp_size=2, vllm_pd_decode_tp_size=2, vllm_pd_npu_count=8)
# What render.yml needs to render the prefill host's files; the argv and env come from the inventory
# variables the prefill role maps into the engine role (prefill/defaults/main.yml).
ENGINE = dict(render=True, engine_kind='prefill', engine_name='prefill', engine_unit='vllm-pd-prefill.service',
              engine_cluster='{{ vllm_pd_cluster }}', engine_address={'address': '10.0.30.10', 'interface': 'ens1f0'},
              engine_kv_role='kv_producer', engine_kv_port=30000, engine_model='{{ vllm_pd_model }}',
              engine_api_port=8100, engine_tp_size=2, engine_dp_size=1, engine_dp_args=[], engine_dp_rpc_port=12342,
              engine_extra_args='{{ vllm_pd_extra_args | default([]) }}', engine_vllm_binary='/bin/true',
              engine_devices=['0', '1'], engine_abort_request_timeout=480,
              engine_env='{{ vllm_pd_engine_env | default({}) }}', engine_runtime='systemd',
              engine_container_image='localhost/vllm-ascend:v1', engine_container_engine='podman',
              engine_container_run_options='{{ vllm_pd_container_run_options | default([]) }}')
CONTAINER = dict(engine_runtime='container', vllm_pd_runtime='container', vllm_pd_container_image='localhost/vllm-ascend:v1')


class Err(object):
    """A named error: VARIABLE, on host p/d of the row or on its cluster ('c'), every word in its text."""

    def __init__(self, variable, where, *words):
        self.variable, self.where, self.words = variable, where, words


class Safe(object):
    """No error for the row; its unit runs the argv and its env file holds the variables the inventory gave."""


ROWS = [
    # --- argv words with control characters: refused (a newline would add directives to the unit)
    ('argv_newline', dict(p=dict(vllm_pd_extra_args=['--seed', '1\nExecStartPre=/bin/sh -c evil'])),
     Err('vllm_pd_extra_args', 'p', "'\\n'", 'control characters')),
    ('argv_cr', dict(c=dict(vllm_pd_extra_args=['--dtype\rfloat16'])), Err('vllm_pd_extra_args', 'p', "'\\r'")),
    ('argv_nul', dict(c=dict(vllm_pd_extra_args=['a\x00b'])), Err('vllm_pd_extra_args', 'd', "'\\x00'")),
    ('argv_escape', dict(c=dict(vllm_pd_extra_args=['\x1b[31m'])), Err('vllm_pd_extra_args', 'p', "'\\x1b'")),
    ('argv_tab', dict(c=dict(vllm_pd_extra_args=['a\tb'])), Err('vllm_pd_extra_args', 'p', "'\\t'")),
    ('argv_del', dict(d=dict(decode_extra_args=['x\x7f'])), Err('decode_extra_args', 'd', "'\\x7f'")),
    ('model_newline', dict(c=dict(vllm_pd_model='/data/m\nExecStartPre=/bin/evil')),
     Err('vllm_pd_model', 'p', 'control character', 'one plain string')),
    ('run_options_newline', dict(c=dict(CONTAINER, vllm_pd_container_run_options=['--shm-size=1g\n--privileged'])),
     Err('vllm_pd_container_run_options', 'p', 'control character')),
    ('image_newline', dict(c=dict(CONTAINER, vllm_pd_container_image='img\nExecStopPost=/bin/evil')),
     Err('vllm_pd_container_image', 'p', 'control character')),
    ('proxy_args_newline', dict(p=dict(proxy_extra_args=['--x\n'])), Err('proxy_extra_args', 'p', 'control character')),
    ('cluster_newline', dict(c=dict(vllm_pd_cluster='a\nExecStartPre=/bin/evil')),
     Err('vllm_pd_cluster', 'p', 'not a cluster name', 'rename the cluster')),
    ('cluster_percent', dict(c=dict(vllm_pd_cluster='100%Z')), Err('vllm_pd_cluster', 'd', 'not a cluster name')),
    ('cluster_star', dict(c=dict(vllm_pd_cluster='*')), Err('vllm_pd_cluster', 'p', 'not a cluster name')),
    ('binary_prefix', dict(c=dict(vllm_pd_vllm_binary='-/opt/vllm')),
     Err('vllm_pd_vllm_binary', 'p', "systemd's prefixes", 'path of the executable')),
    ('binary_dollar', dict(c=dict(vllm_pd_vllm_binary='/opt/$VENV/bin/vllm')), Err('vllm_pd_vllm_binary', 'd', "'$'")),
    # --- argv words systemd would expand or split: escaped, the engine gets exactly them
    ('argv_percent', dict(c=dict(vllm_pd_extra_args=['--served-model-name', '/data/100%Zsure', '%n%%'])), Safe()),
    ('argv_dollar', dict(c=dict(vllm_pd_extra_args=['$HOME', '${PATH}', 'a$$b', '$', 'x$'])), Safe()),
    ('argv_quotes', dict(c=dict(vllm_pd_extra_args=['a"b', "c'd", '"', "'", '"quoted"'])), Safe()),
    ('argv_backslash', dict(c=dict(vllm_pd_extra_args=['e\\f', 'g\\', '\\n', '\\\\', '\\x41'])), Safe()),
    ('argv_spaces', dict(c=dict(vllm_pd_extra_args=['two words', ' lead', 'trail ', '  '])), Safe()),
    ('argv_semicolon', dict(c=dict(vllm_pd_extra_args=[';', '\\;', 'a;b', '&&', '|', '#x'])), Safe()),
    ('argv_numbers', dict(c=dict(vllm_pd_extra_args=['--max-model-len', 4096, '--gpu-memory-utilization', 0.9])),
     Safe()),
    ('argv_json_unicode', dict(c=dict(vllm_pd_extra_args=['--additional-config', '{"a": "b c", "d": "%$"}',
                                                          '模型/路径'])), Safe()),
    ('model_hostile_but_safe', dict(c=dict(vllm_pd_model='/data/100%Zsure $x/"m\'s"\\model')), Safe()),
    ('container_run_options_safe', dict(c=dict(CONTAINER, vllm_pd_container_run_options=[
        '--env=PCT=50%', '--label=a$b', '--volume=/data/a b:/data/a b:ro'])), Safe()),
    # --- vllm_pd_engine_env
    ('env_newline', dict(c=dict(vllm_pd_engine_env={'A': 'x\nLD_PRELOAD=/tmp/evil.so'})),
     Err('vllm_pd_engine_env', 'p', 'control character', 'remove it')),
    ('env_cr', dict(c=dict(vllm_pd_engine_env={'A': 'x\r'})), Err('vllm_pd_engine_env', 'd', "'\\r'")),
    ('env_nul', dict(c=dict(vllm_pd_engine_env={'A': 'x\x00'})), Err('vllm_pd_engine_env', 'p', "'\\x00'")),
    ('env_key_equals', dict(c=dict(vllm_pd_engine_env={'A=B': '1'})),
     Err('vllm_pd_engine_env', 'p', "'A=B'", '[A-Za-z_][A-Za-z0-9_]*', 'rename the key')),
    ('env_key_space', dict(c=dict(vllm_pd_engine_env={'HAS SPACE': '1'})), Err('vllm_pd_engine_env', 'd', 'HAS SPACE')),
    ('env_key_digit', dict(c=dict(vllm_pd_engine_env={'1ABC': '1'})), Err('vllm_pd_engine_env', 'p', '1ABC')),
    ('env_key_empty', dict(c=dict(vllm_pd_engine_env={'': '1'})), Err('vllm_pd_engine_env', 'p', "key ''")),
    ('env_pinned_host_ip', dict(c=dict(vllm_pd_engine_env={'VLLM_HOST_IP': '10.0.30.99'})),
     Err('vllm_pd_engine_env', 'p', 'VLLM_HOST_IP', 'pins', 'set vllm_pd_host_ip')),
    ('env_pinned_hccl_if_ip', dict(c=dict(vllm_pd_engine_env={'HCCL_IF_IP': '10.0.30.99'})),
     Err('vllm_pd_engine_env', 'd', 'HCCL_IF_IP', 'vllm_pd_host_ip')),
    ('env_pinned_gloo', dict(c=dict(vllm_pd_engine_env={'GLOO_SOCKET_IFNAME': 'eth9'})),
     Err('vllm_pd_engine_env', 'p', 'GLOO_SOCKET_IFNAME', 'set vllm_pd_interface')),
    ('env_pinned_tp', dict(p=dict(vllm_pd_engine_env={'TP_SOCKET_IFNAME': 'eth9'})),
     Err('vllm_pd_engine_env', 'p', 'TP_SOCKET_IFNAME', 'vllm_pd_interface')),
    ('env_pinned_hccl_socket', dict(d=dict(prefill_env={}, decode_env={'HCCL_SOCKET_IFNAME': 'eth9'})),
     Err('decode_env', 'd', 'HCCL_SOCKET_IFNAME', 'vllm_pd_interface')),
    ('env_pinned_devices', dict(c=dict(vllm_pd_engine_env={'ASCEND_RT_VISIBLE_DEVICES': '0,1,2,3'})),
     Err('vllm_pd_engine_env', 'p', 'ASCEND_RT_VISIBLE_DEVICES', 'prefill_devices')),
    ('env_pinned_nixl_abort', dict(c=dict(vllm_pd_engine_env={'VLLM_NIXL_ABORT_REQUEST_TIMEOUT': '60'})),
     Err('vllm_pd_engine_env', 'p', 'VLLM_NIXL_ABORT_REQUEST_TIMEOUT', 'vllm_pd_abort_request_timeout')),
    ('ascend_version_not_a_release', dict(c=dict(vllm_pd_vllm_ascend_version='latest')),
     Err('vllm_pd_vllm_ascend_version', 'p', 'not a vllm-ascend release', 'v0.18.0rc1')),
    ('env_not_mapping', dict(c=dict(vllm_pd_engine_env='HF_TOKEN=x')),
     Err('vllm_pd_engine_env', 'p', 'must be a mapping', 'YAML mapping')),
    ('env_value_list', dict(c=dict(vllm_pd_engine_env={'A': ['x']})), Err('vllm_pd_engine_env', 'p', 'A is a list')),
    ('env_value_bool', dict(c=dict(vllm_pd_engine_env={'A': True})), Err('vllm_pd_engine_env', 'p', 'quote the value')),
    ('env_container_blank', dict(c=dict(CONTAINER, vllm_pd_engine_env={'A': ' x'})),
     Err('vllm_pd_engine_env', 'p', '--env-file', 'leading/trailing blanks')),
    ('env_container_backslash', dict(c=dict(CONTAINER, vllm_pd_engine_env={'A': 'a\\b'})),
     Err('vllm_pd_engine_env', 'p', '--env-file')),
    ('env_hostile_but_safe', dict(c=dict(vllm_pd_engine_env={
        'HF_TOKEN': 'hf_abc$def', 'Q': '"quoted"', 'S': "'single'", 'B': 'back\\slash', 'T': 'tick`x`',
        'W': '  blanks  ', 'H': '#not a comment', 'E': 'a=b=c', 'SEMI': ';x', 'TAB': 'a\tb', 'EMPTY': '',
        'N': 8, 'PCT': '100%Z'})), Safe()),
    ('env_container_plain', dict(c=dict(CONTAINER, vllm_pd_engine_env={'HF_TOKEN': 'hf_x$y', 'P': '50%', 'Q': 'a"b'})),
     Safe()),
    # --- secrets
    ('api_key_word', dict(c=dict(vllm_pd_extra_args=['--api-key', 'sk-secret'])),
     Err('vllm_pd_extra_args', 'p', 'world-readable', 'VLLM_API_KEY in vllm_pd_engine_env')),
    ('api_key_equals', dict(c=dict(vllm_pd_extra_args=['--api-key=sk-secret'])),
     Err('vllm_pd_extra_args', 'd', 'VLLM_API_KEY')),
    ('api_key_decode', dict(d=dict(decode_extra_args=['--api-key', 'k'])), Err('decode_extra_args', 'd', 'VLLM_API_KEY')),
    # --- graceful shutdown: one variable sets the option and systemd's stop timeout together
    ('shutdown_timeout_in_args', dict(c=dict(vllm_pd_extra_args=['--shutdown-timeout', '30'])),
     Err('vllm_pd_extra_args', 'p', 'passes --shutdown-timeout', 'set vllm_pd_shutdown_timeout')),
    ('shutdown_timeout_in_args_equals', dict(d=dict(decode_extra_args=['--shutdown-timeout=30'])),
     Err('decode_extra_args', 'd', '--shutdown-timeout')),
    ('shutdown_timeout_text', dict(d=dict(decode_shutdown_timeout='1m')),
     Err('decode_shutdown_timeout', 'd', 'decode_shutdown_timeout=1m must be a whole number of seconds')),
    ('shutdown_timeout_negative', dict(c=dict(vllm_pd_shutdown_timeout=-5)),
     Err('vllm_pd_shutdown_timeout', 'p', 'whole number of seconds')),
    ('shutdown_timeout_off', dict(c=dict(vllm_pd_shutdown_timeout=0)), Safe()),
    # --- types
    ('args_string', dict(c=dict(vllm_pd_extra_args='--enforce-eager')),
     Err('vllm_pd_extra_args', 'p', 'must be a list of argv words', 'YAML list')),
    ('args_mapping', dict(c=dict(vllm_pd_extra_args={'--seed': 1})), Err('vllm_pd_extra_args', 'p', 'not a dict')),
    ('args_element_dict', dict(c=dict(vllm_pd_extra_args=['--x', {'a': 1}])),
     Err('vllm_pd_extra_args', 'p', 'vllm_pd_extra_args[1]', 'not a string')),
    ('args_element_bool', dict(c=dict(vllm_pd_extra_args=[True])), Err('vllm_pd_extra_args', 'p', 'is bool')),
    ('args_element_null', dict(c=dict(vllm_pd_extra_args=[None])), Err('vllm_pd_extra_args', 'p', 'is NoneType')),
    ('run_options_string', dict(c=dict(CONTAINER, vllm_pd_container_run_options='--shm-size=16g')),
     Err('vllm_pd_container_run_options', 'p', 'must be a list')),
    ('kv_extra_string', dict(c=dict(vllm_pd_kv_connector_extra='use_ascend_direct=true')),
     Err('vllm_pd_kv_connector_extra', 'p', 'must be a mapping', 'YAML mapping')),
    ('kv_extra_list', dict(c=dict(vllm_pd_kv_connector_extra=['a'])), Err('vllm_pd_kv_connector_extra', 'd', 'not a list')),
    ('stop_services_string', dict(c=dict(vllm_pd_stop_services='grafana-server')),
     Err('vllm_pd_stop_services', 'p', 'list of unit names')),
    ('unevaluable', dict(c=dict(vllm_pd_extra_args='{{ no_such_variable_anywhere }}')),
     Err('vllm_pd_extra_args', 'p', 'cannot be evaluated', 'no_such_variable_anywhere')),
    # --- numbers and ports
    ('decode_kv_port_abc', dict(c=dict(vllm_pd_decode_kv_port='abc')),
     Err('vllm_pd_decode_kv_port', 'd', 'vllm_pd_decode_kv_port=abc must be a positive integer')),
    ('kv_port_text', dict(c=dict(vllm_pd_kv_port='30000x')), Err('vllm_pd_kv_port', 'p', 'positive integer')),
    ('kv_port_negative', dict(c=dict(vllm_pd_kv_port=-5)), Err('vllm_pd_kv_port', 'p', '=-5 must be a positive')),
    ('kv_port_over', dict(c=dict(vllm_pd_kv_port=70000)), Err('vllm_pd_kv_port', 'p', 'outside the TCP ports 1-65535')),
    ('kv_group_over', dict(c=dict(vllm_pd_kv_port=65530, vllm_pd_prefill_tp_size=8, vllm_pd_decode_tp_size=8)),
     Err('vllm_pd_kv_port', 'p', 'port group 65530-65537', 'whole group fits')),
    ('kv_port_float', dict(c=dict(vllm_pd_kv_port=30000.5)), Err('vllm_pd_kv_port', 'p', 'positive integer')),
    ('api_port_over', dict(p=dict(prefill_api_port=70000)), Err('prefill_api_port', 'p', '1-65535')),
    ('api_port_zero', dict(d=dict(decode_api_port=0)), Err('decode_api_port', 'd', 'positive integer')),
    ('proxy_port_over', dict(c=dict(vllm_pd_proxy_port=65536)), Err('vllm_pd_proxy_port', 'p', '1-65535')),
    ('dp_rpc_port_over', dict(c=dict(vllm_pd_prefill_dp_rpc_port=99999)), Err('vllm_pd_prefill_dp_rpc_port', 'p', '1-65535')),
    ('tp_text', dict(c=dict(vllm_pd_prefill_tp_size='eight')), Err('vllm_pd_prefill_tp_size', 'p', 'positive integer')),
    ('dp_bool', dict(c=dict(vllm_pd_decode_dp_size=True)), Err('vllm_pd_decode_dp_size', 'd', 'positive integer')),
    ('npu_count_zero', dict(c=dict(vllm_pd_npu_count=0)), Err('vllm_pd_npu_count', 'p', 'positive integer')),
    ('npu_count_negative', dict(c=dict(vllm_pd_npu_count=-8)), Err('vllm_pd_npu_count', 'd', 'positive integer')),
    # --- topology
    ('host_two_clusters', dict(x='two_clusters'), Err('vllm_pd_cluster', 'p', '2 cluster groups', 'one cluster group only')),
    ('host_own_cluster_value', dict(p=dict(vllm_pd_cluster='elsewhere')),
     Err('vllm_pd_cluster', '*', 'have different vllm_pd_cluster', 'once in the group')),
    ('same_machine', dict(d=dict(ansible_host='192.0.2.250'), p=dict(ansible_host='192.0.2.250')),
     Err('ansible_host', 'c', 'same machine', 'one inventory host per machine')),
    ('same_address_other_port', dict(d=dict(ansible_host='192.0.2.251', ansible_port=2222),
                                     p=dict(ansible_host='192.0.2.251')), Safe()),
    ('no_proxy_host', dict(x='no_proxy'), Err('vllm_pd_proxy', 'c', 'no host of the cluster is in group vllm_pd_proxy',
                                              'vllm_pd_proxy_enabled: false')),
    ('proxy_opted_out', dict(x='no_proxy', c=dict(vllm_pd_proxy_enabled=False)), Safe()),
    ('proxy_opt_out_contradicted', dict(c=dict(vllm_pd_proxy_enabled=False)),
     Err('vllm_pd_proxy_enabled', 'c', 'is false but', 'remove the host')),
    ('proxy_enabled_text', dict(c=dict(vllm_pd_proxy_enabled='no')), Err('vllm_pd_proxy_enabled', 'p', 'not a boolean')),
    # --- vllm_pd_state (issue 21): retire a host, never a whole side or the proxy's host
    ('state_typo', dict(d=dict(vllm_pd_state='gone')), Err('vllm_pd_state', 'd', 'not present or absent')),
    ('state_absent_proxy_host', dict(p=dict(vllm_pd_state='absent')),
     Err('vllm_pd_state', 'p', "cluster's proxy host", 'move the proxy')),
    ('state_absent_last_decode', dict(d=dict(vllm_pd_state='absent')),
     Err('vllm_pd_state', 'c', 'every decode host', 'keep one decode host present')),
    # --- monitoring ports (issue 22): the field report's Grafana inside the group, and its neighbours
    ('grafana_in_group', dict(c=dict(vllm_pd_monitoring_ports=[3000, 9090, 30001])),
     Err('vllm_pd_monitoring_ports', 'p', 'monitoring port 30001', 'kv_port group 30000-30001 of instance prefill',
         'MonitoringPortCollision', 'move vllm_pd_kv_port')),
    ('grafana_in_external_dp_group', dict(c=dict(vllm_pd_prefill_dp_size=2, vllm_pd_monitoring_ports=[30003]),
                                          p=dict(vllm_pd_prefill_dp_ranks=[0, 1])),
     Err('vllm_pd_monitoring_ports', 'p', '30003', 'group 30002-30003 of instance prefill-dp1', 'DP rank(s) 1')),
    ('prometheus_on_decode_api', dict(d=dict(vllm_pd_monitoring_ports=[8200])),
     Err('vllm_pd_monitoring_ports', 'd', '8200', 'API port 8200 of instance decode', 'decode_api_port')),
    ('exporter_on_proxy_port', dict(c=dict(vllm_pd_proxy_port=8082)),
     Err('vllm_pd_monitoring_ports', 'p', '8082 (npu-exporter)', 'proxy port 8082', 'change vllm_pd_proxy_port')),
    ('monitoring_in_adxl_window', dict(c=dict(vllm_pd_monitoring_ports=[23000])),
     Err('vllm_pd_monitoring_ports', 'd', '23000', 'ADXL) window 20000-27999')),
    ('monitoring_in_moved_adxl_window', dict(c=dict(vllm_pd_monitoring_ports=[40500],
                                                    vllm_pd_engine_env={'ASCEND_BASE_PORT': '40000'})),
     Err('vllm_pd_monitoring_ports', 'p', '40500', 'window 40000-47999', 'ASCEND_BASE_PORT 40000')),
    ('monitoring_in_hccl_range', dict(c=dict(vllm_pd_monitoring_ports=[60010])),
     Err('vllm_pd_monitoring_ports', 'd', '60010', 'HCCL port range 60000-60031')),
    ('monitoring_not_a_list', dict(c=dict(vllm_pd_monitoring_ports='3000')),
     Err('vllm_pd_monitoring_ports', 'p', 'must be a list of TCP ports')),
    ('monitoring_port_over', dict(c=dict(vllm_pd_monitoring_ports=[3000, 70000])),
     Err('vllm_pd_monitoring_ports', 'd', 'vllm_pd_monitoring_ports[1]=70000', '1-65535')),
    ('monitoring_ports_clear', dict(c=dict(vllm_pd_monitoring_ports=[3000, 9090, 9100, 8082, 30002, 29999])), Safe()),
    # --- pipeline / prefill context parallel sizes (inventory/parallel.py) and the engine env's port windows
    ('pp_variable_and_args_disagree', dict(p=dict(vllm_pd_prefill_pp_size=4, prefill_extra_args=['-pp', '2'])),
     Err('vllm_pd_prefill_pp_size', 'p', 'vllm_pd_prefill_pp_size=4 but prefill_extra_args pass --pipeline-parallel-size 2',
         'in one place')),
    ('pp_args_not_a_number', dict(c=dict(vllm_pd_extra_args=['--pipeline-parallel-size=two'])),
     Err('vllm_pd_prefill_pp_size', 'p', '--pipeline-parallel-size two', 'not a whole number')),
    ('pp_and_pcp_on_0_18', dict(c=dict(vllm_pd_vllm_ascend_version='0.18.0', vllm_pd_prefill_pp_size=2,
                                       vllm_pd_prefill_pcp_size=2)),
     Err('vllm_pd_prefill_pp_size', 'p', "vllm-ascend 0.18.0's Mooncake connector", 'not both', 'to 1')),
    ('decode_pipeline_parallel', dict(d=dict(decode_extra_args=['-pp', '2'])),
     Err('vllm_pd_decode_pp_size', 'd', 'decode pp size must be 1', 'set vllm_pd_decode_pp_size to 1')),
    ('prefill_pp_differs_between_hosts', dict(p=dict(vllm_pd_prefill_pp_size=2), x='two_prefill'),
     Err('vllm_pd_prefill_pp_size', 'c', 'different pipeline/context parallel sizes', 'pp 2 pcp 1')),
    ('user_extra_pp_size_disagrees', dict(c=dict(vllm_pd_kv_connector_extra={'prefill': {'pp_size': 2}})),
     Err('vllm_pd_kv_connector_extra', 'p', 'prefill.pp_size=2 disagrees with the plan', 'launches with 1')),
    ('pp_layer_partition_wrong_count', dict(c=dict(vllm_pd_prefill_pp_size=2,
                                                   vllm_pd_kv_connector_extra={'prefill': {'pp_layer_partition': '30'}})),
     Err('vllm_pd_kv_connector_extra', 'd', 'pp_layer_partition=30', '2 comma-separated numbers')),
    ('monitoring_in_pp_group', dict(c=dict(vllm_pd_prefill_pp_size=2, vllm_pd_monitoring_ports=[30003])),
     Err('vllm_pd_monitoring_ports', 'p', 'kv_port group 30000-30003 of instance prefill', 'tp 2, pp 2')),
    ('monitoring_in_moved_te_rpc_range', dict(c=dict(vllm_pd_monitoring_ports=[41000], vllm_pd_engine_env={
        'MC_MIN_RPC_PORT': '40000', 'MC_MAX_RPC_PORT': '42000'})),
     Err('vllm_pd_monitoring_ports', 'd', '41000', 'RPC range 40000-42000')),
    ('monitoring_in_moved_hccl_range', dict(c=dict(vllm_pd_monitoring_ports=[50010], prefill_env={
        'HCCL_IF_BASE_PORT': '50000'})),
     Err('vllm_pd_monitoring_ports', 'p', '50010', 'HCCL port range 50000-50031')),
    ('env_hccl_base_not_a_port', dict(c=dict(vllm_pd_engine_env={'HCCL_IF_BASE_PORT': '70000'})),
     Err('vllm_pd_engine_env', 'p', 'HCCL_IF_BASE_PORT=70000', 'port number')),
    ('env_te_rpc_range_empty', dict(c=dict(vllm_pd_engine_env={'MC_MIN_RPC_PORT': '17001'})),
     Err('vllm_pd_engine_env', 'd', 'RPC range is empty', 'MC_MIN_RPC_PORT at or below MC_MAX_RPC_PORT')),
]
NAMES = [r[0] for r in ROWS]
# names make cluster and host names: they must stay valid
assert len(set(NAMES)) == len(NAMES) and all(re.match(r'^[a-z0-9_]+$', n) for n in NAMES)


def _inventory():
    hosts_p, hosts_d, proxy = {}, {}, {}
    children = {}
    for i, (name, spec, expect) in enumerate(ROWS):
        p, d = 'p-' + name, 'd-' + name
        # documentation addresses (RFC 5737), one machine per host; render.yml never connects
        pv = dict(ansible_host='192.0.2.%d' % (i + 1))
        dv = dict(ansible_host='198.51.100.%d' % (i + 1))
        if isinstance(expect, Safe):
            pv.update(ENGINE)
        pv.update(spec.get('p', {}))
        dv.update(spec.get('d', {}))
        hosts_p[p] = {}
        hosts_d[d] = {}
        if spec.get('x') != 'no_proxy':
            proxy[p] = {}
        group = dict(BASE, vllm_pd_cluster=name)
        group.update(spec.get('c', {}))
        if isinstance(expect, Safe) and 'engine_runtime' in group:
            pv['engine_runtime'] = group.pop('engine_runtime')
        children['cluster_' + name] = {'hosts': {p: pv, d: dv}, 'vars': group}
        if spec.get('x') == 'two_prefill':
            p2 = 'p2-' + name
            hosts_p[p2] = {}
            children['cluster_' + name]['hosts'][p2] = dict(ansible_host='203.0.113.%d' % (i + 1))
        if spec.get('x') == 'two_clusters':
            children['cluster_' + name + '_b'] = {'hosts': {p: {}}, 'vars': dict(BASE, vllm_pd_cluster=name + '_b')}
    children.update(vllm_pd_prefill={'hosts': hosts_p}, vllm_pd_decode={'hosts': hosts_d}, vllm_pd_proxy={'hosts': proxy})
    return {'all': {'children': children}}


@pytest.fixture(scope='module')
def matrix(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('hostile')
    (tmp / 'hosts.json').write_text(json.dumps(_inventory()))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_ROOT, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, 'ansible.cfg'),
               ANSIBLE_FORKS='8')
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', str(tmp / 'hosts.json'),
                        RENDER, '-e', 'out=%s' % tmp, '-e', 'ansible_python_interpreter=%s' % sys.executable],
                       capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    return tmp, json.loads((tmp / 'errors.json').read_text())


def test_the_matrix_has_enough_rows():
    assert len(ROWS) >= 40
    assert sum(isinstance(r[2], Safe) for r in ROWS) >= 10


@pytest.mark.parametrize('name, spec, expect', [r for r in ROWS if isinstance(r[2], Err)], ids=lambda v: v if isinstance(v, str) else '')
def test_hostile_value_is_a_named_error(matrix, name, spec, expect):
    _tmp, errors = matrix
    host = {'p': 'p-' + name, 'd': 'd-' + name}.get(expect.where, '')
    mine = [e for e in errors if e['variable'] == expect.variable
            and (e['host'] == host or host in e['host'].split(', ') if host else True)
            and (e['cluster'] in (name, '*') if expect.where == 'c' else True)
            and (name in e['text'])]
    assert mine, 'no %s error for row %s; all errors of the row: %s' % (
        expect.variable, name, [e['text'] for e in errors if name in e['text']])
    assert any(all(w in e['text'] for w in expect.words) for e in mine), [e['text'] for e in mine]
    # every error says how to fix it
    assert all(e['fix'] for e in mine)


def _unit_argv(path, key='ExecStart'):
    lines = [line[len(key) + 1:] for line in path.read_text().splitlines() if line.startswith(key + '=')]
    assert len(lines) == 1, lines
    return split_exec(lines[0])


@pytest.mark.parametrize('name, spec, expect', [r for r in ROWS if isinstance(r[2], Safe)], ids=lambda v: v if isinstance(v, str) else '')
def test_hostile_value_is_written_safely(matrix, name, spec, expect):
    tmp, errors = matrix
    assert [e['text'] for e in errors if e['cluster'] == name or name in e['host']] == []
    c = dict(BASE, **spec.get('c', {}))
    argv = _unit_argv(tmp / ('p-%s-vllm-pd.service' % name))
    serve = argv[argv.index('/bin/true'):]
    assert serve[:3] == ['/bin/true', 'serve', str(c['vllm_pd_model'])]
    extra = [str(w) for w in c.get('vllm_pd_extra_args', [])]
    assert serve[len(serve) - len(extra):] == extra
    assert json.loads(serve[serve.index('--kv-transfer-config') + 1])['kv_port'] == 30000
    if c.get('vllm_pd_runtime') == 'container':
        image = argv.index(c['vllm_pd_container_image'])
        opts = c.get('vllm_pd_container_run_options', [])
        assert argv[image - len(opts):image] == opts
        assert argv[:2] == ['podman', 'run']
    env = parse_env_file((tmp / ('p-%s-vllm-pd.env' % name)).read_text())
    want = dict((k, str(v)) for k, v in c.get('vllm_pd_engine_env', {}).items())
    assert dict((k, env[k]) for k in want if k in env) == want
    assert env['VLLM_HOST_IP'] == '10.0.30.10' and env['GLOO_SOCKET_IFNAME'] == 'ens1f0'
    if c.get('vllm_pd_runtime') == 'container':
        # podman/docker --env-file read KEY=VALUE verbatim: the same values
        raw = dict(line.split('=', 1) for line in (tmp / ('p-%s-vllm-pd.env' % name)).read_text().splitlines()
                   if line and not line.startswith('#'))
        assert dict((k, raw[k]) for k in want) == want


@pytest.mark.skipif(not shutil.which('systemd-analyze'), reason='systemd-analyze is not installed')
def test_systemd_loads_every_rendered_unit(matrix, tmp_path):
    """systemd's own parser: no unresolvable specifier, no unknown escape, no second command."""
    tmp, _errors = matrix
    units = sorted(p for p in os.listdir(str(tmp)) if p.endswith('-vllm-pd.service'))
    assert len(units) == sum(isinstance(r[2], Safe) for r in ROWS)
    for name in units:
        text = (tmp / name).read_text()
        # verify resolves the executables: the container rows run podman, which this machine may lack
        text = re.sub(r'^(ExecStart(?:Pre|Post)?|ExecStop(?:Post)?)=(-?)"?podman"?', r'\1=\2/bin/true', text, flags=re.M)
        unit = tmp_path / name.replace('p-', 'hostile-', 1)
        unit.write_text(text)
        r = subprocess.run(['systemd-analyze', 'verify', '--man=no', str(unit)], capture_output=True, text=True,
                           timeout=60, check=False)
        messages = [line for line in (r.stdout + r.stderr).splitlines() if unit.name in line or 'specifier' in line
                    or 'escape' in line.lower()]
        assert r.returncode == 0 and not [m for m in messages if 'EnvironmentFile' not in m], (name, r.stdout, r.stderr)


# ------------------------------------------------------------------ the writers alone, on many random words

ALPHABET = [chr(c) for c in range(0x20, 0x7f)] + ['é', '模', 'ß', '\t']


def _random_words(seed, count=400):
    import random
    rng = random.Random(seed)
    for _word in range(count):
        yield ''.join(rng.choice(ALPHABET) for _char in range(rng.randrange(0, 12)))


def test_every_printable_word_round_trips_through_exec_start():
    from ansible_collections.vllm_pd.ascend.plugins.filter.pd_systemd_argv import pd_systemd_argv
    words = [w for w in _random_words(13) if '\t' not in w]
    for i in range(0, len(words), 7):
        argv = ['/usr/bin/vllm'] + words[i:i + 7]
        assert split_exec(pd_systemd_argv(argv)) == argv


def test_every_value_round_trips_through_the_env_file():
    from ansible_collections.vllm_pd.ascend.plugins.filter.pd_systemd_env import pd_systemd_env
    env = dict(('K%d' % i, w) for i, w in enumerate(_random_words(17)))
    assert parse_env_file(pd_systemd_env(env) + '\n') == env
    # literal (podman/docker --env-file): what it accepts is read back verbatim by both parsers
    plain = dict((k, v) for k, v in env.items() if '\\' not in v and v == v.strip(' \t') and v[:1] not in '\'"')
    text = pd_systemd_env(plain, literal=True)
    assert parse_env_file(text + '\n') == plain == dict(line.split('=', 1) for line in text.splitlines())


@pytest.mark.parametrize('argv, words', [
    (['/bin/vllm', 'a\nExecStartPre=/bin/evil'], "control character '\\n'"),
    (['/bin/vllm', 'a\x00'], "control character '\\x00'"),
    (['-/bin/vllm'], "prefixes"),
    (['/opt/$X/vllm'], "holds '$'"),
    ([], 'empty'),
    ('vllm serve', 'must be a list'),
    (['/bin/vllm', None], 'not a string'),
])
def test_pd_systemd_argv_refuses_what_systemd_cannot_take(argv, words):
    from ansible.errors import AnsibleFilterError
    from ansible_collections.vllm_pd.ascend.plugins.filter.pd_systemd_argv import pd_systemd_argv
    with pytest.raises(AnsibleFilterError, match=re.escape(words)):
        pd_systemd_argv(argv)


@pytest.mark.parametrize('env, literal, words', [
    ({'A': 'x\ny'}, False, "environment variable A: the value holds the control character '\\n'"),
    ({'A=B': 'x'}, False, "name 'A=B'"),
    ({'A': ' x'}, True, 'environment variable A: the value has blanks at an end'),
    ({'A': ['x']}, False, 'environment variable A: the value is a list'),
    ('A=1', False, 'must be a mapping'),
])
def test_pd_systemd_env_refuses_and_never_shows_the_value(env, literal, words):
    from ansible.errors import AnsibleFilterError
    from ansible_collections.vllm_pd.ascend.plugins.filter.pd_systemd_env import pd_systemd_env
    with pytest.raises(AnsibleFilterError) as exc:
        pd_systemd_env(env, literal=literal)
    assert words in str(exc.value)
    if isinstance(env, dict) and isinstance(env.get('A'), str):
        assert env['A'].strip() not in str(exc.value)


def test_the_env_file_task_keeps_secrets_out_of_logs_and_diffs(tmp_path):
    """The env file is written by the start guard's file_set call (issue 16): 0600, and file_set never
    returns a content (its content option is no_log): not in its result, its invocation or its diff.
    The module runs as Ansible runs it (a process, the real exit_json with its no_log masking)."""
    import yaml
    # unit_files.yml (imported by files.yml and install_common.yml): what install.yml writes (and plan.yml compares in
    # check mode)
    with open(os.path.join(REPO_ROOT, 'roles', 'engine', 'tasks', 'unit_files.yml')) as f:
        tasks = yaml.safe_load(f)
    task = next(t for t in tasks if t.get('ansible.builtin.import_tasks') == 'guard.yml')
    env = next(f for f in task['vars']['engine_guard_files'] if f['path'] == '{{ __engine_env_path }}')
    assert env['mode'] == '0600' and 'vllm-pd.env.j2' in env['content']
    path = str(tmp_path / 'prefill.env')
    for check in (True, False):
        args = tmp_path / 'args.json'
        args.write_text(json.dumps({'ANSIBLE_MODULE_ARGS': {
            'files': [{'path': path, 'content': 'HF_TOKEN=hf_secret_value_123\n', 'mode': '0600'}],
            'owner': pwd.getpwuid(os.getuid()).pw_name, 'group': grp.getgrgid(os.getgid()).gr_name,
            '_ansible_check_mode': check, '_ansible_diff': True}}))
        r = subprocess.run([sys.executable, '-m', 'ansible_collections.vllm_pd.ascend.plugins.modules.file_set', str(args)],
                           capture_output=True, text=True, check=False, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        res = json.loads(r.stdout)
        assert not res.get('failed') and res['changed'] and res['changed_paths'] == [path], r.stdout + r.stderr
        assert res['invocation']['module_args']['files'][0]['mode'] == '0600'  # the invocation is there, masked
        assert 'hf_secret_value_123' not in r.stdout + r.stderr, r.stdout
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
