"""Contracts between the collection, its release table and the real upstream source of each release.

One test id per release of plugins/module_utils/common/releases.py (supported and refused: for a refused
release the table's facts are asserted too, which documents why it is refused). The sources come from
scripts/fetch-upstream's cache (conftest.py); nothing upstream is imported, it is read with `ast`, and the
few pieces of pure-argparse code are executed on their own.
"""
import ast
import contextlib
import io
import json
import logging
import re
import sys
import types
from pathlib import Path

import pytest
import yaml

import upstream_code as uc
from upstream_src import ROOT, upstream_tree
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
from ansible_collections.vllm_pd.ascend.plugins.filter import pd_instances
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_findings, doctor_host, doctor_inspect
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor import doctor_launch, doctor_metrics
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import engine_env
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import pd_consistency
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import port_group as pg
from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import bench_kv, bench_vllm, file_sd

ENV_NAME = r'[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+'
FLAG_WORD = re.compile(r"""['"](--[a-z][a-z0-9-]*)['"]""")
# Variables the collection sets for the engine that are read by native code, not by vLLM/vllm-ascend Python:
# the name and why it is valid. Mooncake's are also looked up in the Mooncake wheel's engine.so where the
# release pins a wheel.
NATIVE_ENV = {
    'HCCL_IF_IP': 'CANN HCCL: the address HCCL communicates on',
    'HCCL_SOCKET_IFNAME': 'CANN HCCL: the interface of its socket connections',
    'HCCL_IF_BASE_PORT': 'CANN HCCL: the first of its listen ports',
    'HCCL_RDMA_TIMEOUT': 'CANN HCCL: RDMA retransmission timeout exponent',
    'HCCL_RDMA_RETRY_CNT': 'CANN HCCL: RDMA retransmissions',
    'HCCL_RDMA_TC': 'CANN HCCL: the RDMA traffic class',
    'HCCL_RDMA_SL': 'CANN HCCL: the RDMA service level',
    'ASCEND_PROCESS_LOG_PATH': 'CANN: the directory of its process logs (plog)',
    'ASCEND_RT_VISIBLE_DEVICES': 'CANN runtime: the NPUs the process sees',
    'ASCEND_BASE_PORT': "Mooncake's Ascend transport (C++, built with USE_ASCEND): the first ADXL port",
    'GLOO_SOCKET_IFNAME': 'torch.distributed gloo: the interface of its sockets',
    'TP_SOCKET_IFNAME': 'torch TensorPipe RPC: the interface of its sockets',
}
MOONCAKE_ENV = {
    'MC_MIN_RPC_PORT': 'Mooncake transfer engine: the low end of its RPC port range',
    'MC_MAX_RPC_PORT': 'Mooncake transfer engine: the high end of its RPC port range',
    'MC_MIN_PRC_PORT': 'Mooncake transfer engine: the low end of its RPC port range, misspelled (all v0.3.9 reads)',
    'MC_MAX_PRC_PORT': 'Mooncake transfer engine: the high end of its RPC port range, misspelled (all v0.3.9 reads)',
}


def _collection(path):
    return (ROOT / path).read_text(encoding='utf-8')


def _py_text(tree_root, *subdirs):
    """All Python source of SUBDIRS under TREE_ROOT, one string."""
    return '\n'.join(p.read_text(encoding='utf-8', errors='replace')
                     for d in subdirs for p in sorted((Path(tree_root) / d).rglob('*.py')))


def _quoted_env_names(tree_root, subdir):
    """The quoted environment-variable-like names in the Python source under TREE_ROOT/SUBDIR."""
    return set(re.findall(r'''["'](%s)["']''' % ENV_NAME, _py_text(tree_root, subdir)))


# ---------------------------------------------------------------------------------------------------------
# a. flags: vllm serve and vllm bench serve

def _plans(entry, **kwargs):
    """The collection's instance plans of a prefill side (tp 2, DP 4, external ranks 1 and 2) for each parallel
    layout the release allows (table port_terms)."""
    layouts = [(1, 1)] + ([(2, 1)] if 'pp' in entry['port_terms'] else []) + (
        [(1, 2)] if 'pcp' in entry['port_terms'] else [])
    for pp, pcp in layouts:
        sizes = dict(pp_size=pp, pcp_size=pcp) if (pp, pcp) != (1, 1) else {}
        yield pd_instances.engine_instances(**dict(dict(kind='prefill', tp_size=2, dp_size=4, dp_ranks=[1, 2],
                                                        api_port=8100, kv_port=30000, model_kind='moe'), **dict(sizes, **kwargs)))


def collection_serve_flags(entry):
    """Every `vllm serve` option the collection can render for a release, from the code that renders them."""
    engine_vars = yaml.safe_load(_collection('roles/engine/vars/main.yml'))
    flags, seen, todo = set(), set(), ['__engine_command']
    while todo:  # __engine_command and the argv pieces (*_args) it names, transitively
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        text = json.dumps(engine_vars[name])
        if name == '__engine_command' or name.endswith('_args'):
            flags.update(FLAG_WORD.findall(text.replace('\\"', "'")))
            # the options read from the release table (__engine_flag: its serve_flags)
            flags.update(entry['serve_flags'][f] for f in re.findall(r'__engine_flag\.(\w+)', text))
        todo += [n for n in re.findall(r'__engine_\w+', text) if n in engine_vars]
    typed = {}
    for name, _flag, kind in pd_consistency.SETTINGS:
        typed[name] = {'int': 1, 'json': {'method': 'x'}}.get(kind, 'x')
    flags.update(w for w in pd_consistency.setting_args(typed) if w.startswith('--'))
    # the plan's argv pieces (dp_args, and pipeline/context sizes where the planner has them)
    for plan in _plans(entry):
        for instance in plan:
            for key, words in instance.items():
                if key.endswith('_args'):
                    flags.update(w for w in words if w.startswith('--'))
    return flags


def serve_flags(up):
    cli = list((up.vl / 'vllm' / 'entrypoints').rglob('cli_args.py'))
    return uc.add_argument_flags(up.vl / 'vllm' / 'engine' / 'arg_utils.py', *cli)


def test_serve_flags(upstream):
    flags = serve_flags(upstream)
    assert len(flags) > 100, 'too few vllm serve options found: the parser moved (%d)' % len(flags)
    assert ('--shutdown-timeout' in flags) == upstream.entry['shutdown_timeout'], (
        'table shutdown_timeout=%s, but vLLM %s %s --shutdown-timeout' % (
            upstream.entry['shutdown_timeout'], upstream.entry['vllm'], 'has' if '--shutdown-timeout' in flags else 'lacks'))
    rendered = collection_serve_flags(upstream.entry)
    # install.yml passes --shutdown-timeout only when the installed `vllm serve` lists it
    if not upstream.entry['shutdown_timeout']:
        rendered.discard('--shutdown-timeout')
    assert sorted(rendered - flags) == []


def bench_argv_flags(flags=()):
    """The options of the benchmark's `vllm bench serve` argv when the release lists FLAGS (the required ones and
    --max-concurrency always; the others only when listed)."""
    spec = dict(host='h', port=1, endpoint='/v1/completions', model='m', input_len=1, output_len=1, count=1, rate=1,
                concurrency=2, served_model_name='s', seed=0)
    return {w for w in bench_vllm.argv('vllm', spec, set(flags), 'd', 'f') if w.startswith('--')}


def collection_bench_flags():
    """The options the benchmark always passes to `vllm bench serve` (the others only when listed)."""
    return bench_argv_flags() | set(bench_vllm.REQUIRED_FLAGS)


def plugin_serve_reads():
    """The serve_flags names the plugins read by name: _FLAG['name'] and releases.serve_spellings('name')."""
    text = '\n'.join(p.read_text(encoding='utf-8') for p in sorted((ROOT / 'plugins').rglob('*.py')))
    pairs = re.findall(r'''\b_FLAG\[["'](\w+)["']\]|serve_spellings\(["'](\w+)["']''', text)
    return {name for pair in pairs for name in pair if name}


def test_serve_flags_of_the_table(upstream):
    """Every option of the table's serve_flags, and each short spelling of serve_aliases, is one `vllm serve` of the
    release has (--shutdown-timeout where the table says the release has it, the pcp option where its port_terms
    have pcp: the plan refuses pcp > 1 elsewhere), the alias of that very option; and the collection uses each:
    the engine role renders it (__engine_flag), the plan or the P/D settings render it, or a plugin reads it."""
    entry = upstream.entry
    flags = serve_flags(upstream)
    table, aliases = dict(entry['serve_flags']), dict(entry['serve_aliases'])
    if not entry['shutdown_timeout']:
        table.pop('shutdown_timeout')
    if 'pcp' not in entry['port_terms']:
        table.pop('prefill_context_parallel_size')
        aliases.pop('prefill_context_parallel_size')
    assert sorted(f for f in table.values() if f not in flags) == []
    calls = uc.add_argument_spellings(upstream.vl / 'vllm' / 'engine' / 'arg_utils.py')
    assert sorted('%s %s' % (table[n], a) for n, a in aliases.items() if not any({table[n], a} <= c for c in calls)) == []
    engine_vars = _collection('roles/engine/vars/main.yml') + _collection('roles/engine/tasks/files.yml')
    rendered = collection_serve_flags(entry)
    used = set(re.findall(r'__engine_flag\.(\w+)', engine_vars)) | plugin_serve_reads() | {
        n for n, f in entry['serve_flags'].items() if f in rendered}
    assert sorted(set(entry['serve_flags']) - used) == []
    assert sorted(set(entry['serve_aliases']) - set(entry['serve_flags'])) == []


def test_bench_flags(upstream):
    """Every option of the table's bench_flags is one `vllm bench serve` of the release has; the benchmark always
    passes only options the release has, and where it lists them all passes each option of bench_flags and no other."""
    flags = uc.add_argument_flags(*sorted((upstream.vl / 'vllm' / 'benchmarks').rglob('*.py')))
    table = set(upstream.entry['bench_flags'].values())
    assert sorted(table - flags) == []
    assert sorted(collection_bench_flags() - flags) == []
    assert sorted(bench_argv_flags(flags) ^ table) == []


def argument_choices(paths, flag):
    """The choices of every add_argument(FLAG, choices=...) in PATHS: a list of strings, or (list(NAME) /
    list(NAME.keys())) the keys of the dict literal NAME is assigned in PATHS."""
    trees = [uc.parse(p) for p in paths]
    dicts = {}
    for tree in trees:
        for node in ast.walk(tree):
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(
                node, 'target', None) if isinstance(node, ast.AnnAssign) else None
            if isinstance(target, ast.Name) and isinstance(getattr(node, 'value', None), ast.Dict):
                dicts[target.id] = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    out = set()
    for tree in trees:
        for node in ast.walk(tree):
            if uc.call_name(node) != 'add_argument' or not any(
                    isinstance(a, ast.Constant) and a.value == flag for a in node.args):
                continue
            for kw in node.keywords:
                if kw.arg != 'choices':
                    continue
                if isinstance(kw.value, ast.List):
                    out |= {e.value for e in kw.value.elts if isinstance(e, ast.Constant)}
                names = [n.id for n in ast.walk(kw.value) if isinstance(n, ast.Name) and n.id in dicts]
                for name in names:
                    out |= dicts[name]
    return out


def test_bench_values(upstream):
    """The values the benchmark passes to `vllm bench serve` (bench_vllm.argv: the table's bench_values) are ones the
    release takes: a backend and a dataset of its choices, and latencies it reports percentiles of (a mean_<m>_ms
    of its metrics)."""
    files = sorted((upstream.vl / 'vllm' / 'benchmarks').rglob('*.py'))
    flags, values = upstream.entry['bench_flags'], upstream.entry['bench_values']
    spec = dict(host='h', port=1, endpoint='/v1/completions', model='m', input_len=1, output_len=1, count=1, rate=1)
    argv = bench_vllm.argv('vllm', spec, set(), 'd', 'f')
    given = dict((argv[i], argv[i + 1]) for i in range(len(argv) - 1) if argv[i].startswith('--'))
    assert given[flags['backend']] == values['backend']
    assert given[flags['backend']] in argument_choices(files, flags['backend'])
    assert given[flags['dataset_name']] == values['dataset_name']
    assert given[flags['dataset_name']] in argument_choices(files, flags['dataset_name'])
    metrics = given[flags['percentile_metrics']].split(',')
    assert metrics == list(values['percentile_metrics'])
    serve_py = (upstream.vl / 'vllm' / 'benchmarks' / 'serve.py').read_text(encoding='utf-8')
    assert sorted(m for m in metrics if not re.search(r'\bmean_%s_ms\s*:' % m, serve_py)) == []


# ---------------------------------------------------------------------------------------------------------
# b. plain --help vs --help=all

def _help(namespace, argv):
    parser_class = namespace['FlexibleArgumentParser']
    parser_class._search_keyword = None
    top = parser_class(prog='vllm')
    leaf = top.add_subparsers(dest='subcommand').add_parser('serve', usage='vllm serve [options]')
    group = leaf.add_argument_group('ParallelConfig', 'Parallel settings')
    group.add_argument('--contract-probe-flag', type=int, default=1, help='probe')
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        top.parse_args(['serve'] + argv)
    parser_class._search_keyword = None
    return out.getvalue()


def test_help_lists_flags(upstream):
    path = uc.module_of_class(upstream.vl / 'vllm' / 'utils', 'FlexibleArgumentParser')
    assert path, 'no FlexibleArgumentParser in vLLM %s vllm/utils' % upstream.entry['vllm']
    namespace = uc.load_classes(path, ['FlexibleArgumentParser'])
    lists = [a for a in ('--help', '--help=all') if '--contract-probe-flag' in _help(namespace, [a])]
    assert lists, 'neither --help nor --help=all lists the options'
    assert lists[0] == upstream.entry['cli_lists_flags']
    # the benchmark (a module on the bench host) tries the release's option first
    assert bench_vllm.HELP_OPTIONS[0] == upstream.entry['cli_lists_flags']


# ---------------------------------------------------------------------------------------------------------
# c. environment

def collection_engine_env(version):
    """The variables the collection sets or reads for the engine: the env file template's, and the names
    in the engine-env rules, the preflight's port rules, the start guard and the doctor."""
    facts = releases.runtime(version)
    template = _collection('roles/engine/templates/vllm-pd.env.j2').replace(
        '{{ __engine_upstream.host_ip_env }}', facts['host_ip_env'])
    template = re.sub(r'\{\{ __engine_upstream\.engine_env_names\.(\w+) \}\}',
                      lambda m: facts['engine_env_names'][m.group(1)], template)
    names = set(re.findall(r'^(%s)=' % ENV_NAME, template, re.M))
    for path in ['plugins/module_utils/inventory/engine_env.py', 'plugins/module_utils/inventory/inventory_rules.py',
                 'plugins/module_utils/ports/port_free.py', 'plugins/module_utils/guard/start_guard.py'] + sorted(
                     str(p.relative_to(ROOT)) for p in (ROOT / 'plugins/module_utils/inventory').glob('rules_*.py')) + sorted(
                     str(p.relative_to(ROOT)) for p in (ROOT / 'plugins/module_utils/doctor').glob('doctor_*.py')):
        names |= uc.str_constants(uc.parse(ROOT / path), ENV_NAME)
    # the names the doctor and the transfer-timeout rule read from the table
    names |= set(doctor_host.NET_ENV) | set(doctor_launch.FIT_ENV) | {
        doctor_findings.HOST_IP_ENV, doctor_findings.HCCL_IF_IP_ENV, doctor_inspect.HOST_IP_ENV,
        engine_env.TRANSFER_TIMEOUT_ENV, engine_env.RDMA_TIMEOUT_ENV, engine_env.RDMA_RETRY_CNT_ENV}
    # the abort name of the other releases is not written for this one (the template asks engine_env)
    other = {engine_env.ABORT_MOONCAKE, engine_env.ABORT_NIXL} - set(engine_env.abort_timeout_names(version))
    return names - other


def test_engine_env(upstream):
    read = _quoted_env_names(upstream.vl, 'vllm') | _quoted_env_names(upstream.va, 'vllm_ascend')
    engine_so = (upstream.mc / 'mooncake' / 'engine.so').read_bytes() if upstream.mc else None
    unread = []
    for name in sorted(collection_engine_env(upstream.version)):
        if name in read:
            continue
        if name in MOONCAKE_ENV and (engine_so is None or name.encode() in engine_so):
            continue
        if name in NATIVE_ENV:
            continue
        unread.append(name)
    assert unread == [], 'read by neither vLLM %s nor vllm-ascend %s nor listed as a CANN/torch/Mooncake variable' % (
        upstream.entry['vllm'], upstream.version)


def test_engine_env_names_of_the_table(upstream):
    """The table's engine_env_names are the names the env file sets, each read by the native code NATIVE_ENV
    names (none of them is a vLLM or vllm-ascend variable)."""
    names = set(upstream.entry['engine_env_names'].values())
    assert sorted(names - set(NATIVE_ENV)) == []
    assert names <= collection_engine_env(upstream.version)


def _env_reads(tree_root, subdir):
    """The names the Python under TREE_ROOT/SUBDIR reads from the environment by a literal name (os.getenv,
    os.environ.get, os.environ[...])."""
    return set(re.findall(r'''(?:getenv|environ\.get|environ\[)\(?\s*["'](%s)["']''' % ENV_NAME,
                          _py_text(tree_root, subdir)))


def _strings(value):
    if isinstance(value, str):
        return [value]
    return [s for v in (value.values() if isinstance(value, dict) else value) for s in _strings(v)]


def test_user_env_names(upstream):
    """The variables of the user's engine env the checks read (window_env, pd_match_env, intra_roce_env,
    api_key_env, log_path_env) are the release's: vLLM's server authenticates with its API key variable and
    vllm-ascend reads the intra-RoCE switch from the environment; every other one is an env read of vLLM's or vllm-ascend's Python (0.23: HCCL_RDMA_TIMEOUT in
    kv_transfer/utils/utils.py) or is read by native code (CANN: NATIVE_ENV; Mooncake's transfer engine: MOONCAKE_ENV,
    found in the wheel's engine.so where the release pins one)."""
    entry = upstream.entry
    python = _env_reads(upstream.vl, 'vllm') | _env_reads(upstream.va, 'vllm_ascend')
    # vLLM's API key: a variable of vllm/envs.py that its OpenAI server authenticates with (envs.NAME)
    envs_py = (upstream.vl / 'vllm' / 'envs.py').read_text(encoding='utf-8')
    assert re.search(r'''environ\.get\(\s*["']%s["']''' % entry['api_key_env'], envs_py)
    assert 'envs.%s' % entry['api_key_env'] in _py_text(upstream.vl, 'vllm/entrypoints')
    assert entry['intra_roce_env'] in _env_reads(upstream.va, 'vllm_ascend')
    assert entry['intra_roce_env'] in entry['pd_match_env']
    engine_so = (upstream.mc / 'mooncake' / 'engine.so').read_bytes() if upstream.mc else None
    names = set(_strings(entry['window_env'])) | set(entry['pd_match_env']) | {entry['log_path_env']}
    for name in sorted(names - python):
        if name in MOONCAKE_ENV:
            assert engine_so is None or name.encode() in engine_so, name
        else:
            assert name in NATIVE_ENV, name


def test_transfer_timeout_env(upstream):
    """The table's transfer_timeout_env: the names vllm-ascend's get_transfer_timeout_value reads (os.getenv), with
    the defaults of the transfer-timeout rule (engine_env) for the RDMA ones, also read by CANN HCCL (NATIVE_ENV)."""
    names = upstream.entry['transfer_timeout_env']
    assert (engine_env.TRANSFER_TIMEOUT_ENV, engine_env.RDMA_TIMEOUT_ENV, engine_env.RDMA_RETRY_CNT_ENV) == (
        names['transfer'], names['rdma_timeout'], names['rdma_retry'])
    source = _py_text(upstream.va, 'vllm_ascend')
    fn = re.search(r'def get_transfer_timeout_value\(.*?\n(?=\S|\Z)', source, re.S)
    assert fn, 'no get_transfer_timeout_value in vllm-ascend %s' % upstream.version
    reads = dict(re.findall(r'''getenv\(\s*["'](%s)["']\s*,\s*["']?(\d*)["']?''' % ENV_NAME, fn.group(0)))
    assert reads == {names['transfer']: '', names['rdma_timeout']: str(engine_env.RDMA_TIMEOUT_DEFAULT),
                     names['rdma_retry']: str(engine_env.RDMA_RETRY_CNT_DEFAULT)}
    assert {names['rdma_timeout'], names['rdma_retry']} <= set(NATIVE_ENV)


def test_abort_env(upstream):
    tree = uc.parse(upstream.connector)
    read = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and 'expired' in fn.name:
            read |= {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                     and n.value.id == 'envs'}
    assert read == {upstream.entry['abort_env']}
    assert engine_env.abort_timeout_names(upstream.version) == [upstream.entry['abort_env']]
    envs_py = (upstream.vl / 'vllm' / 'envs.py').read_text(encoding='utf-8')
    default = re.search(r'''["']%s["']\s*:\s*lambda:\s*int\(\s*os\.getenv\(\s*["']%s["']\s*,\s*["'](\d+)["']'''
                        % ((re.escape(upstream.entry['abort_env']),) * 2), envs_py)
    assert default, '%s is not defined in vLLM %s envs.py' % (upstream.entry['abort_env'], upstream.entry['vllm'])
    assert int(default.group(1)) == upstream.entry['abort_default']


# ---------------------------------------------------------------------------------------------------------
# d. kv-transfer-config keys

def collection_kv_config(entry):
    """(top-level keys, extra-config keys 'side.key') of the kv-transfer-config the engine role renders (its keys
    read from the table's kv_config_keys)."""
    engine_vars = yaml.safe_load(_collection('roles/engine/vars/main.yml'))
    top = {entry['kv_config_keys'][k] for k in re.findall(r'__engine_kv_keys\.(\w+)', engine_vars['__engine_kv_transfer_config'])}
    extra = set()
    for side, keys in engine_vars['__engine_parallel'].items():
        # a dict of Jinja values, or one Jinja expression of dict literals ({'tp_size': ...} | combine(...))
        names = keys if isinstance(keys, dict) else re.findall(r"""['"]([a-z_]+)['"]\s*:""", keys)
        extra |= {'%s.%s' % (side, key) for key in names}
    return top, extra


def connector_extra_keys(tree):
    """The kv_connector_extra_config keys the connector reads: get_from_extra_config('K') and, for a
    section assigned from it, section['k'], section.get('k'), 'k' in section(.keys())."""
    sections, keys = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and uc.call_name(node.value) == 'get_from_extra_config':
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            name = getattr(target, 'id', None) or getattr(target, 'attr', None)
            sections[name] = node.value.args[0].value
    for node in ast.walk(tree):
        if uc.call_name(node) == 'get_from_extra_config':
            key = node.args[0].value
            if key not in sections.values():
                keys.add(key)

    def section_of(expr):
        if isinstance(expr, ast.Call) and uc.call_name(expr) == 'keys':
            expr = expr.func.value
        name = getattr(expr, 'id', None) or getattr(expr, 'attr', None)
        return sections.get(name) if isinstance(expr, (ast.Name, ast.Attribute)) else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and section_of(node.value) and isinstance(node.slice, ast.Constant):
            keys.add('%s.%s' % (section_of(node.value), node.slice.value))
        elif (uc.call_name(node) == 'get' and isinstance(node.func, ast.Attribute) and section_of(node.func.value)
              and node.args and isinstance(node.args[0], ast.Constant)):
            keys.add('%s.%s' % (section_of(node.func.value), node.args[0].value))
        elif (isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In) and isinstance(node.left, ast.Constant)
              and section_of(node.comparators[0])):
            keys.add('%s.%s' % (section_of(node.comparators[0]), node.left.value))
    return keys


def test_kv_transfer_config(upstream):
    read = connector_extra_keys(uc.parse(upstream.connector))
    assert sorted(upstream.entry['extra_config_keys']) == sorted(read)
    top, extra = collection_kv_config(upstream.entry)
    assert top == set(upstream.entry['kv_config_keys'].values()), 'the engine role renders other keys than the table names'
    if 'pp' not in upstream.entry['port_terms']:
        # pp_size is rendered only above 1, which the inventory rules refuse where the connector has no pp term
        extra -= {'prefill.pp_size', 'decode.pp_size'}
    assert sorted(extra - read) == [], 'rendered extra-config keys the connector does not read'
    kv_config = next((upstream.vl / 'vllm').rglob('kv_transfer.py'), None)
    fields = set()
    for cls in ast.walk(uc.parse(kv_config)):
        if isinstance(cls, ast.ClassDef) and cls.name == 'KVTransferConfig':
            fields = {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign)}
    assert sorted(top - fields) == [], 'rendered kv-transfer-config keys vLLM %s does not have' % upstream.entry['vllm']
    # the kv_role values: P produces, D consumes (KVProducer / KVConsumer literals of the config module)
    text = kv_config.read_text(encoding='utf-8')
    for side, alias in (('prefill', 'KVProducer'), ('decode', 'KVConsumer')):
        literal = re.search(r'%s\s*=\s*Literal\[([^\]]*)\]' % alias, text)
        assert literal and '"%s"' % upstream.entry['kv_roles'][side] in literal.group(1), (side, alias)
    # the connector name is registered with the module the table names
    registry = _py_text(upstream.va, 'vllm_ascend/distributed')
    assert re.search(r'''["']%s["'],\s*["']%s["']''' % (upstream.entry['connector'], re.escape(upstream.entry['connector_module'])),
                     registry), 'connector %s is not registered as %s' % (upstream.entry['connector'], upstream.entry['connector_module'])


# ---------------------------------------------------------------------------------------------------------
# e. the port formula

def connector_port_exprs(tree):
    """(side_channel_port expressions of scheduler and worker, the sender's bind offsets, the worker's)."""
    sides, sender, worker = [], [], []
    classes = {c.name: c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}

    def offsets(cls, target):
        out = []
        for fn in ast.walk(cls):
            if not isinstance(fn, ast.FunctionDef):
                continue
            local = {}
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    local[node.targets[0].id] = node.value
            for node in ast.walk(fn):
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Add)
                        and uc.is_self_attr(node.value.left, 'side_channel_port')
                        and target(node.targets[0])):
                    rhs = node.value.right
                    out.append(local[rhs.id] if isinstance(rhs, ast.Name) and rhs.id in local else rhs)
        return out

    for name, cls in classes.items():
        for node in ast.walk(cls):
            if (isinstance(node, ast.Assign) and uc.is_self_attr(node.targets[0], 'side_channel_port')
                    and not isinstance(node.value, ast.Name)):
                sides.append(node.value)
        if name.startswith('KVCacheSendingThread') or name == 'KVCacheStoreSendingThread':
            sender += offsets(cls, lambda t: isinstance(t, ast.Name) and t.id == 'handshake_port')
        if name.endswith('Worker'):
            worker += offsets(cls, lambda t: uc.is_self_attr(t, 'handshake_port'))
    return sides, sender, worker


def upstream_ports(exprs, kv_port, tp, pp, pcp, dp_rank):
    """The ports a producer's DP rank binds per the connector, as a list (one per worker)."""
    sides, sender, _worker = exprs
    vllm_config = uc.Strict('vllm_config',
                            kv_transfer_config=uc.Strict('kv_transfer_config', kv_port=kv_port),
                            parallel_config=uc.Strict('parallel_config', data_parallel_rank=dp_rank, tensor_parallel_size=tp,
                                                      pipeline_parallel_size=pp, data_parallel_size=4,
                                                      prefill_context_parallel_size=pcp))
    out = []
    side_values = {uc.evaluate(e, {'vllm_config': vllm_config, 'self': uc.Strict('self', pcp_size=pcp, pp_size=pp,
                                                                                 tp_size=tp)}) for e in sides}
    assert len(side_values) == 1, 'scheduler and worker disagree on side_channel_port: %s' % sorted(side_values)
    side = side_values.pop()
    for pp_rank in range(pp):
        for pcp_rank in range(pcp):
            for tp_rank in range(tp):
                me = uc.Strict('self', pp_rank=pp_rank, pcp_rank=pcp_rank, tp_rank=tp_rank, tp_size=tp, pp_size=pp,
                               pcp_size=pcp, prefill_tp_size=tp, _prefill_tp_size=tp)
                values = {uc.evaluate(e, {'self': me}) for e in sender}
                assert len(values) == 1, 'the sender binds differently in its two places: %s' % sorted(values)
                out.append(side + values.pop())
    return out


def _reads(exprs, **sizes):
    base = dict(kv_port=30000, tp=2, pp=1, pcp=1, dp_rank=1)
    changed = dict(base, **sizes)
    return set(upstream_ports(exprs, **base)) != set(upstream_ports(exprs, **changed))


def _collection_group(kv_port, tp, pp, pcp, dp_rank):
    return pg.port_group(kv_port, tp_size=tp, pp_size=pp, pcp_size=pcp, dp_rank_start=dp_rank, dp_size_local=1)


def test_port_formula(upstream):
    tree = uc.parse(upstream.connector)
    exprs = connector_port_exprs(tree)
    sides, sender, worker = exprs
    assert len(sides) >= 2 and sender and worker, 'side_channel_port/handshake_port expressions not found'
    entry = upstream.entry
    # which sizes the formula reads, and whether pp and pcp may be combined, are the table's facts
    assert [t for t in ('pp', 'pcp') if _reads(exprs, **{t: 2})] == [t for t in entry['port_terms'] if t != 'tp']
    if entry['pp_pcp'] != 'none':
        both = upstream_ports(exprs, 30000, 2, 2, 2, 0)
        assert ('both' if len(set(both)) == len(both) else 'exclusive') == entry['pp_pcp']
    sizes = [(pp, pcp) for pp in (1, 2) if pp == 1 or 'pp' in entry['port_terms']
             for pcp in (1, 2) if pcp == 1 or 'pcp' in entry['port_terms']]
    if entry['pp_pcp'] != 'both':
        sizes = [(pp, pcp) for pp, pcp in sizes if pp == 1 or pcp == 1]
    kv_port = 30000
    for tp in range(1, 9):
        plan = pd_instances.engine_instances('prefill', tp, 4, [], 8100, None, 'h', 'systemd', 'podman', '', kv_port, 'moe')
        assert sorted(pd_instances.group_ports(plan[0])) == sorted(
            p for r in range(4) for p in upstream_ports(exprs, kv_port, tp, 1, 1, r))
        for dp_rank in range(4):
            ext = pd_instances.engine_instances('prefill', tp, 4, [dp_rank], 8100, None, 'h', 'systemd', 'podman', '',
                                                kv_port, 'moe')[0]
            assert sorted(pd_instances.group_ports(ext)) == sorted(upstream_ports(exprs, kv_port, tp, 1, 1, dp_rank))
            for pp, pcp in sizes:
                want = upstream_ports(exprs, kv_port, tp, pp, pcp, dp_rank)
                assert sorted(_collection_group(kv_port, tp, pp, pcp, dp_rank)) == sorted(want), (tp, pp, pcp, dp_rank)
                ext = pd_instances.engine_instances('prefill', tp, 4, [dp_rank], kv_port=kv_port, model_kind='moe',
                                                    pp_size=pp, pcp_size=pcp)[0]
                assert sorted(pd_instances.group_ports(ext)) == sorted(want), (tp, pp, pcp, dp_rank)
                # the worker's own handshake port is one of its sender's
                me = uc.Strict('self', pp_rank=pp - 1, pcp_rank=pcp - 1, tp_rank=tp - 1, tp_size=tp, pp_size=pp,
                               pcp_size=pcp, prefill_tp_size=tp, _prefill_tp_size=tp)
                assert {uc.evaluate(e, {'self': me}) for e in worker} <= {w - want[0] for w in want}


def test_only_producer_binds(upstream):
    tree = uc.parse(upstream.connector)
    up = uc.parents(tree)
    guards = []
    for node in ast.walk(tree):
        if uc.call_name(node) and uc.call_name(node).startswith('KVCacheSendingThread') and isinstance(node.func, ast.Name):
            parent = up.get(node)
            while parent is not None and not isinstance(parent, (ast.If, ast.IfExp)):
                parent = up.get(parent)
            guards.append(ast.unparse(parent.test) if parent is not None else None)
    producer = upstream.entry['kv_roles']['prefill']
    assert guards and all(re.fullmatch(r'''self\.kv_role == ['"]%s['"]''' % producer, g or '') for g in guards), guards
    # each role serves its own kind, whose kv_role the engine's serve entry point takes from the table
    assert 'engine_kv_role: "{{ __engine_upstream.kv_roles[engine_kind] }}"' in _collection('roles/engine/tasks/serve.yml')
    roles = {kind: re.search(r'^    engine_kind: (\w+)$', _collection('roles/%s/tasks/main.yml' % kind), re.M).group(1)
             for kind in ('prefill', 'decode')}
    assert roles == {'prefill': 'prefill', 'decode': 'decode'}
    # the start guard and the preflight check a group for the producer only
    assert re.search(r"if engine_kind == 'prefill' else None", _collection('roles/engine/vars/main.yml'))


# ---------------------------------------------------------------------------------------------------------
# f. the KV transfer log line

# a sample value per conversion, by the word before it (or, for '(%d groups, %d blocks)', after it)
_BEFORE = {'request': 'cmpl-3f2a-0-1a2b3c4d', 'took': 12.5, 'local_ip': '10.0.0.2', 'local_device_id': 3,
           'remote_session_id': '10.0.0.1:15123'}
_AFTER = {'groups': 2, 'blocks': 7}


def _sample(fmt, match):
    before = fmt[:match.start()].split()
    after = re.findall(r'\w+', fmt[match.end():])
    if before and before[-1] in _BEFORE:
        return _BEFORE[before[-1]]
    if after and after[0] in _AFTER:
        return _AFTER[after[0]]
    raise AssertionError('no sample value for %s at %d of %r: extend _BEFORE/_AFTER' % (match.group(0), match.start(), fmt))


def test_kv_log_line(upstream):
    found = []
    for node in ast.walk(uc.parse(upstream.connector)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                and node.args[0].value.startswith(upstream.entry['kv_log_grep'])):
            found.append((node.func.attr.upper(), node.args[0].value))
    assert len(found) == 1, found
    level, fmt = found[0]
    assert fmt == upstream.entry['kv_log']
    assert level == upstream.entry['kv_log_level']
    values = tuple(_sample(fmt, m) for m in re.finditer(r'%[.0-9]*[sdf]', fmt))
    line = 'INFO 12-05 10:00:00 [mooncake_connector.py:1] ' + (fmt % values)
    parsed = bench_kv.parse_line(line)
    assert parsed is not None, 'bench_kv.parse_line does not parse %r' % line
    assert (parsed['request'], parsed['ms'], parsed['local_ip'], parsed['remote_address'], parsed['remote_port']) == (
        'cmpl-3f2a-0-1a2b3c4d', 12.5, '10.0.0.2', '10.0.0.1', '15123')


# ---------------------------------------------------------------------------------------------------------
# g. metrics

def collection_metrics():
    """{name: where} of every vllm: metric the dashboard queries, the doctor, the benchmark and the probes read; and the
    doctor's fallback chains (a tuple of names of which the first one exported is read)."""
    used, chains = {}, []
    for path in sorted((ROOT / 'docs' / 'grafana').glob('*.json')):
        def walk(node):
            if isinstance(node, dict):
                for k, v in node.items():
                    if k == 'expr' and isinstance(v, str):
                        for name in re.findall(r'vllm:[a-z0-9_]+', v):
                            used.setdefault(name, path.name)
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(json.loads(path.read_text(encoding='utf-8')))
    for path in [ROOT / 'plugins/module_utils/doctor/doctor_metrics.py', ROOT / 'plugins/module_utils/verify/bench_kv.py'] \
            + sorted(ROOT.glob('roles/*/files/*.py')):
        for name in uc.str_constants(uc.parse(path), r'vllm:[a-z0-9_]+'):
            used.setdefault(name, path.name)
    # what the code reads (from the table's metric_names): the doctor's chains (one name: no fallback), the benchmark's
    for _key, label, names in doctor_metrics.LATENCIES:
        if len(names) > 1:
            chains.append(list(names))
        else:
            used.setdefault(names[0], 'doctor_metrics.py %s' % label)
    used.setdefault(bench_kv.SUCCESS_COUNTER, 'bench_kv.py SUCCESS_COUNTER')
    return used, chains


def _base(name):
    return re.sub(r'_(total|bucket|sum|count|created)$', '', name)


def test_metrics(upstream):
    loggers = uc.parse(upstream.vl / 'vllm' / 'v1' / 'metrics' / 'loggers.py')
    exported = {_base(n) for n in uc.str_constants(loggers, r'vllm:[a-z0-9_]+')}
    assert sorted(n for n in upstream.entry['metrics'] if _base(n) not in exported) == []
    # the host scripts' gauges (busy_gauges): exported, and gauges (no _total/_bucket series)
    assert set(upstream.entry['busy_gauges']) <= set(upstream.entry['metrics'])
    assert [_base(n) for n in upstream.entry['busy_gauges']] == list(upstream.entry['busy_gauges'])
    # the counter proxy_member.py reads between its leak reads: exported, and a counter
    assert upstream.entry['served_counter'] in upstream.entry['metrics'] and upstream.entry['served_counter'].endswith('_total')
    # the table's metric_names: a name exported, a fallback chain (newest first) with its newest name exported
    for role, names in sorted(upstream.entry['metric_names'].items()):
        names = names if isinstance(names, tuple) else (names,)
        assert _base(names[0]) in exported, '%s: %s' % (role, names[0])
    used, chains = collection_metrics()
    for chain in chains:
        assert any(_base(n) in exported for n in chain), 'no name of the fallback chain %s is exported' % chain
    fallbacks = {n for chain in chains for n in chain}
    missing = sorted('%s (%s)' % (n, where) for n, where in used.items() if _base(n) not in exported and n not in fallbacks)
    assert missing == []


# ---------------------------------------------------------------------------------------------------------
# h. the example proxy

def proxy_facts(path):
    tree = uc.parse(path)
    flags = uc.add_argument_flags(path)
    routes, health = set(), None
    imports = set()
    up = uc.parents(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                if (isinstance(dec, ast.Call) and uc.call_name(dec) in ('get', 'post', 'put', 'delete', 'api_route')
                        and dec.args and isinstance(dec.args[0], ast.Constant)):
                    routes.add(dec.args[0].value)
                    if dec.args[0].value == '/healthcheck':
                        health = node
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            parent = up.get(node)
            optional = isinstance(parent, ast.Try) and any(
                getattr(h.type, 'id', None) in ('ImportError', 'ModuleNotFoundError') for h in parent.handlers)
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for mod in mods:
                top = mod.split('.')[0]
                if not optional and top not in sys.stdlib_module_names:
                    imports.add(mod if top == 'vllm' else top)
    return flags, routes, set(health_answer(tree, health)), imports


def health_answer(tree, health):
    """{key: the source of its value} of the dict the /healthcheck handler HEALTH returns, or the dict of the function
    it returns the call of."""
    functions = {f.name: f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    answer, todo = {}, [health] if health else []
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
                answer.update((k.value, ast.unparse(v)) for k, v in zip(node.value.keys, node.value.values)
                              if isinstance(k, ast.Constant))
            elif isinstance(node, ast.Return) and uc.call_name(node.value) in functions:
                todo.append(functions[uc.call_name(node.value)])
    return answer


def health_handler(path):
    tree = uc.parse(path)
    handler = next((node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    for dec in node.decorator_list if isinstance(dec, ast.Call) and dec.args
                    and isinstance(dec.args[0], ast.Constant) and dec.args[0].value == '/healthcheck'), None)
    return tree, handler


def test_the_healthcheck_counts_each_kind_of_member_under_the_table_key(upstream):
    """A restarted process of the proxy tier is ready once its /healthcheck counts the members it was given (pd_unit
    ready.counts, under proxy_member_counts): in the example proxy and the Mooncake wheel's proxy, each key's value is
    the length of that kind's member list."""
    wheel_proxy = upstream.entry['wheel_proxy_module'].replace('.', '/') + '.py'
    for path in [upstream.proxy] + ([upstream.mc / wheel_proxy] if upstream.mc else []):
        answer = health_answer(*health_handler(path))
        for kind, key in sorted(upstream.entry['proxy_member_counts'].items()):
            assert re.fullmatch(r'len\([\w.]*(%s)\w*\)' % kind[:6], answer.get(key, '')), (path.name, kind, answer)


def test_example_proxy(upstream):
    entry = upstream.entry
    flags, routes, keys, imports = proxy_facts(upstream.proxy)
    assert sorted(flags - {'-h', '--help'}) == sorted(entry['proxy_flags'])
    assert sorted(routes) == sorted(entry['proxy_routes'])
    assert sorted(keys) == sorted(entry['proxy_healthcheck_keys'])
    assert sorted(imports) == sorted(entry['proxy_imports'])


def admin_json(path, route):
    """(request keys, answer keys) of the example proxy's admin ROUTE: the keys its handler (or the function it
    awaits/returns) reads with `.get('k')` from the request's JSON, and those of the dicts it returns."""
    tree = uc.parse(path)
    functions = {f.name: f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    handler = next((f for f in functions.values() for dec in f.decorator_list
                    if isinstance(dec, ast.Call) and dec.args and isinstance(dec.args[0], ast.Constant)
                    and dec.args[0].value == route), None)
    assert handler is not None, 'no handler of %s in %s' % (route, path.name)
    reads, answers, todo, seen = set(), set(), [handler], set()
    while todo:
        fn = todo.pop()
        if fn.name in seen:
            continue
        seen.add(fn.name)
        for node in ast.walk(fn):
            name = uc.call_name(node) if isinstance(node, ast.Call) else None
            if name in functions:
                todo.append(functions[name])
            if (name == 'get' and node.args and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                    and 'data' in node.func.value.id):
                reads.add(node.args[0].value)
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
                answers |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    return reads, answers


def test_proxy_admin_json(upstream):
    """The admin API's request keys are those its handlers read, and the member lists and the refusal of its answer
    are under the table's keys (proxy_admin_request, proxy_admin_answer, proxy_admin_error), for both routes; a proxy
    without the admin API has none."""
    entry = upstream.entry
    keys = (entry['proxy_admin_request'], entry['proxy_admin_answer'], entry['proxy_admin_error'])
    if entry['proxy_add_route'] not in entry['proxy_routes']:
        assert keys == (None, None, None)
        return
    for route in (entry['proxy_add_route'], entry['proxy_remove_route']):
        reads, answers = admin_json(upstream.proxy, route)
        assert sorted(entry['proxy_admin_request'].values()) == sorted(reads), route
        assert sorted((set(entry['proxy_admin_answer'].values()) | {entry['proxy_admin_error']}) - answers) == [], route
    assert sorted(entry['proxy_admin_answer']) == sorted(entry['kv_roles'])


def test_proxy_role_flags(upstream):
    """The proxy role passes only options the release's proxies have (the example proxy, and the Mooncake
    wheel's proxy, the role's default, where the release pins the wheel)."""
    role = _collection('roles/proxy/vars/main.yml')
    passed = set(FLAG_WORD.findall(role))
    # the options read from the release table (__proxy_flag: its proxy_argv_flags), every one of them rendered
    names = set(re.findall(r'__proxy_flag\.(\w+)', role))
    assert names == set(upstream.entry['proxy_argv_flags']), 'the proxy role renders other options than the table names'
    passed |= {upstream.entry['proxy_argv_flags'][n] for n in names}
    wheel_proxy = upstream.entry['wheel_proxy_module'].replace('.', '/') + '.py'
    proxies = [upstream.proxy] + ([upstream.mc / wheel_proxy] if upstream.mc else [])
    for path in proxies:
        assert path.is_file(), 'the release has no %s' % path
        assert sorted(passed - uc.add_argument_flags(path)) == [], path.name


# ---------------------------------------------------------------------------------------------------------
# i. the result file of vllm bench serve

def normalize_reads(entry):
    """The result-file keys bench_vllm.normalize reads: each _RESULT['name'] it reads is the table's
    bench_result_keys[name] (a %s key once per percentile metric); it reads none by a literal key."""
    tree = uc.parse(ROOT / 'plugins/module_utils/verify/bench_vllm.py')
    names, literal = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and getattr(node.value, 'id', None) == '_RESULT':
            names.add(node.slice.value if isinstance(node.slice, ast.Constant) else 'by variable')
        if uc.call_name(node) == 'get' and isinstance(node.func.value, ast.Name) and node.func.value.id == 'data':
            key = node.args[0].left if node.args and isinstance(node.args[0], ast.BinOp) else (node.args or [None])[0]
            if not (isinstance(key, ast.Subscript) and getattr(key.value, 'id', None) == '_RESULT'):
                literal.append(ast.unparse(node))
    assert literal == [], 'read the result keys from the release table (bench_result_keys)'
    table = entry['bench_result_keys']
    # a key chosen by a variable (the loop over mean, p50, p90, p99) can be any of the table's
    names = (names - {'by variable'}) | ({'mean', 'p50', 'p90', 'p99'} if 'by variable' in names else set())
    assert sorted(names - set(table)) == []
    keys = set()
    for name in names:
        keys |= {table[name] % m for m in bench_vllm.METRICS} if '%s' in table[name] else {table[name]}
    return keys


def result_keys(serve_py):
    """Constant keys of the benchmark result dict, and patterns for its f-string keys."""
    tree = uc.parse(serve_py)
    consts, patterns = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', None) == 'result' and isinstance(node.value, ast.Dict):
            consts |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
        if isinstance(node, ast.Subscript) and getattr(node.value, 'id', None) == 'result':
            if isinstance(node.slice, ast.Constant):
                consts.add(node.slice.value)
            elif isinstance(node.slice, ast.JoinedStr):
                patterns.append(re.compile(''.join(re.escape(v.value) if isinstance(v, ast.Constant) else '[a-z0-9]+'
                                                   for v in node.slice.values) + '$'))
    return consts, patterns


def test_bench_result_keys(upstream):
    consts, patterns = result_keys(upstream.vl / 'vllm' / 'benchmarks' / 'serve.py')
    assert len(consts) > 10, 'the result dict of vllm/benchmarks/serve.py moved'
    missing = sorted(k for k in normalize_reads(upstream.entry) if k not in consts and not any(p.match(k) for p in patterns))
    assert missing == sorted(upstream.entry['bench_result_missing'])


# ---------------------------------------------------------------------------------------------------------
# j. the image: CANN, vLLM pin, Python

def test_image_pins(upstream):
    dockerfile = (upstream.va / 'Dockerfile').read_text(encoding='utf-8')
    cann = re.search(r'^FROM\s+\S+?/cann:([0-9A-Za-z.]+)-', dockerfile, re.M)
    assert cann and cann.group(1).upper() == upstream.entry['cann'].upper()
    vllm_tag = re.search(r'^ARG VLLM_TAG=v?(\S+)', dockerfile, re.M)
    assert vllm_tag and vllm_tag.group(1) == upstream.entry['vllm']
    mooncake = re.search(r'^ARG MOONCAKE_TAG="?v?([^"\s]+)', dockerfile, re.M)
    assert mooncake and mooncake.group(1) == upstream.entry['mooncake']
    if upstream.entry['mooncake_wheel']:
        assert upstream.entry['mooncake_wheel'] == upstream.entry['mooncake']
    # the Python range: the release's row of its own versioning policy, else of the newest release's
    # (a final release may ship before its row is written: 0.11.0 has only its rc rows)
    pattern = re.compile(r'^\|\s*v%s\s*\|[^|]*\|\s*>=\s*([0-9.]+),\s*<\s*([0-9.]+)\s*\|' % re.escape(upstream.version), re.M)
    newest = max(releases.RELEASES, key=releases.parse_version)
    rows = [pattern.search((tree / 'docs/source/community/versioning_policy.md').read_text(encoding='utf-8'))
            for tree in (upstream.va, upstream_tree('vllm_ascend', newest))]
    row = next((r for r in rows if r), None)
    assert row, 'vllm-ascend %s has no row in the versioning policy' % upstream.version
    assert row.groups() == tuple(upstream.entry['python'])


# ---------------------------------------------------------------------------------------------------------
# k. run-time facts of the table: the proxy's membership changes and Python, the dense DP rank rule

_MEMBER = ('10.0.0.1', 8100)
_OTHER = ('10.0.0.2', 8100)
_DECODER = ('10.0.0.3', 8200)


def _state_class(tree):
    """The example proxy's scheduling state class and its API shape: 'role' (remove_instances(role, [(host, port)]),
    0.23), 'kind' (remove_prefillers([ServerState]), 0.13-0.18), or (None, None) when it has no remove."""
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef):
            methods = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
            if 'remove_instances' in methods:
                return cls.name, 'role'
            if 'remove_prefillers' in methods:
                return cls.name, 'kind'
    return None, None


def _count_released_in_stream(tree, count_key):
    """Whether the proxy-global request count is given back inside the streamed body (after D answered) - else it
    is given back when the handler returns its StreamingResponse, after P answered. Follows calls and method names
    given as strings (0.23's runtime.schedule('finish_request', ...)) from the generator StreamingResponse streams."""
    up = uc.parents(tree)
    functions = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(fn.name, fn)

    def owner(node):
        node = up.get(node)
        while node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = up.get(node)
        return node

    def decrements(node):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Sub):
            return getattr(node.target, 'attr', None) == count_key
        return (isinstance(node, ast.Assign) and getattr(node.targets[0], 'attr', None) == count_key
                and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub) for n in ast.walk(node.value)))
    releasing = {owner(n).name for n in ast.walk(tree) if decrements(n) and owner(n) is not None}
    assert releasing, 'no decrement of %s in the example proxy' % count_key
    todo = [uc.call_name(a) for n in ast.walk(tree) if uc.call_name(n) == 'StreamingResponse' for a in n.args[:1]]
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for n in ast.walk(functions[name]):
            ref = uc.call_name(n) or (n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else None)
            if ref in functions:
                todo.append(ref)
    return bool(seen & releasing)


def proxy_membership(path, count_key):
    """(remove, readd) of the example proxy at PATH, by running its scheduling state class (imports stubbed):
    remove one of two prefill members while a request is counted, then add it again (as the probe's success
    does), and send one request. remove: 'immediate' (it is no longer listed), 'taint_until_idle' or
    'taint_while_prefill' (still listed until the count is 0; the count covers the D stream or only P), None (no
    remove). readd: 'add' (a dropped member is listed again), 'untaint' (the re-added member takes the request),
    'noop' (the other member takes it: the re-added one stays tainted), None."""
    tree = uc.parse(path)
    name, shape = _state_class(tree)
    if shape is None:
        return None, None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if shape == 'role':
            ns = uc.load_classes(path, [name, 'ServerRole'])
            role = next(r for r in ns['ServerRole'] if r.value == 'prefill')
            state = ns[name]([_MEMBER, _OTHER], [_DECODER])
            setattr(state, count_key, 1)
            state.remove_instances(role, [_MEMBER])
            listed = state.healthcheck()['prefill_instances'] == 2
            for host, port in [s.rsplit(':', 1) for s in state.add_instances(role, [_MEMBER])]:
                state.activate_waiting_instance(role, host, int(port))  # the waiting probe succeeded
            relisted = state.healthcheck()['prefill_instances'] == 2
            picked = state.begin_request(1.0)['key'].startswith(_MEMBER[0])
        else:
            ns = uc.load_classes(path, [name, 'ServerState'])
            ns['NodeListener'] = lambda proxy: types.SimpleNamespace(waiting_nodes={})  # no probe thread
            ns.setdefault('logger', logging.getLogger('upstream-proxy'))  # 0.18.0 defines it in a try
            server = ns['ServerState']
            state = ns[name]([_MEMBER, _OTHER], [_DECODER])
            setattr(state, count_key, 1)
            state.remove_prefillers([server(*_MEMBER)])
            listed = server(*_MEMBER) in state.prefillers
            state.add_prefillers([server(*_MEMBER)])  # what add_instances does once the member answers
            relisted = server(*_MEMBER) in state.prefillers
            picked = state.prefillers[state.select_prefiller(1)] == server(*_MEMBER)
    assert relisted, 'the example proxy does not list a member added again'
    if not listed:
        return 'immediate', 'add'
    return ('taint_until_idle' if _count_released_in_stream(tree, count_key) else 'taint_while_prefill'), (
        'untaint' if picked else 'noop')


def test_proxy_membership(upstream):
    """proxy_remove and proxy_readd are what the release's example proxy does (the rolling change's leave and join
    follow them: roles/proxy/files/proxy_member.py)."""
    remove, readd = proxy_membership(upstream.proxy, upstream.entry['proxy_count_key'])
    assert (remove, readd) == (upstream.entry['proxy_remove'], upstream.entry['proxy_readd'])
    # the admin routes exist exactly where the proxy can remove a member
    assert ('/instances/remove' in upstream.entry['proxy_routes']) == (remove is not None)


_ANNOTATION_GENERICS = {'list', 'dict', 'tuple', 'set', 'frozenset', 'type'}


def proxy_min_python(path):
    """The oldest Python 3 (X.Y) that runs the script at PATH: the oldest grammar that parses it, raised to 3.9 for
    a builtin generic (list[int]) and to 3.10 for a union (int | None) in an annotation evaluated at run time (no
    `from __future__ import annotations`). 3.7 at least: every release's proxy calls asyncio.create_task."""
    text = Path(path).read_text(encoding='utf-8')
    assert 'asyncio.create_task(' in text, 'the 3.7 floor (asyncio.create_task) no longer holds for %s' % path
    minor = next(m for m in range(7, sys.version_info[1] + 1) if _parses(text, m))
    tree = ast.parse(text)
    lazy = any(isinstance(n, ast.ImportFrom) and n.module == '__future__' and any(a.name == 'annotations' for a in n.names)
               for n in tree.body)
    if not lazy:
        annotations = [n.annotation for n in ast.walk(tree) if isinstance(n, (ast.arg, ast.AnnAssign)) and n.annotation]
        annotations += [n.returns for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns]
        for ann in annotations:
            for n in ast.walk(ann):
                if isinstance(n, ast.Subscript) and getattr(n.value, 'id', None) in _ANNOTATION_GENERICS:
                    minor = max(minor, 9)
                if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
                    minor = max(minor, 10)
    return '3.%d' % minor


def _parses(text, minor):
    try:
        ast.parse(text, feature_version=(3, minor))
    except SyntaxError:
        return False
    return True


def test_proxy_python(upstream):
    """proxy_python (the preflight's ProxyPythonUnfit floor) is the oldest Python the release's example proxy runs on."""
    assert proxy_min_python(upstream.proxy) == upstream.entry['proxy_python']


def _function(tree, name):
    return next((f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == name), None)


def _assigns_rank(fn, value):
    """Whether FN assigns parallel_config.data_parallel_rank = VALUE (a constant, or the name dp_rank)."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and getattr(n.targets[0], 'attr', None) == 'data_parallel_rank':
            if (isinstance(value, int) and isinstance(n.value, ast.Constant) and n.value.value == value) or (
                    isinstance(value, str) and getattr(n.value, 'id', None) == value):
                return True
    return False


def _resets_dense_rank(fn):
    """Whether the engine core launcher FN sets a non-MoE engine's DP rank to 0 (an `is_moe` test whose other branch
    assigns data_parallel_rank = 0)."""
    for n in ast.walk(fn):
        if isinstance(n, ast.If) and 'is_moe' in ast.unparse(n.test):
            return any(_assigns_rank(s, 0) for s in n.orelse)
    return False


def _env_names(fn):
    """The environment variables FN reads by name (os.getenv / os.environ.get / envs.NAME)."""
    names = set()
    for n in ast.walk(fn):
        if uc.call_name(n) in ('getenv', 'get') and n.args and isinstance(n.args[0], ast.Constant):
            if re.fullmatch(ENV_NAME, str(n.args[0].value)):
                names.add(n.args[0].value)
        if isinstance(n, ast.Attribute) and re.fullmatch(ENV_NAME, n.attr) and getattr(n.value, 'id', '').endswith('envs'):
            names.add(n.attr)
    return names


def dense_dp_rule(up):
    """The dense DP rank rule of a release, as the table spells it, from its source: True when vLLM's launcher keeps
    every DP rank, or a vllm-ascend patch replaces it with one that does unconditionally; the name of the variable
    that gates such a patch (its import in the patch package, or the launcher's early fallback to vLLM's); else
    False (vLLM resets a non-MoE rank to 0)."""
    vllm_fn = _function(uc.parse(up.vl / 'vllm' / 'v1' / 'engine' / 'core.py'), 'run_engine_core')
    assert vllm_fn is not None, 'no run_engine_core in vLLM %s v1/engine/core.py' % up.entry['vllm']
    if not _resets_dense_rank(vllm_fn):
        assert _assigns_rank(vllm_fn, 'dp_rank'), 'vLLM %s run_engine_core sets no DP rank' % up.entry['vllm']
        return True
    patch_root = up.va / 'vllm_ascend' / 'patch'
    rules = []
    for path in sorted(patch_root.rglob('*.py')):
        tree = uc.parse(path)
        replaces = any(isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == 'EngineCoreProc.run_engine_core'
                       for n in tree.body)
        fn = _function(tree, 'run_engine_core')
        if not replaces or fn is None or _resets_dense_rank(fn) or not _assigns_rank(fn, 'dp_rank'):
            continue
        module = '.'.join(path.relative_to(up.va).with_suffix('').parts)
        gates = set()
        # imported under `if <env>` in its package
        init = uc.parse(path.parent / '__init__.py')
        for node in ast.walk(init):
            if isinstance(node, ast.If) and any(isinstance(i, ast.Import) and any(a.name == module for a in i.names)
                                                for i in ast.walk(node)):
                gates |= _env_names(node.test) or {'?' + ast.unparse(node.test)}
        imported = any(isinstance(i, ast.Import) and any(a.name == module for a in i.names) for i in ast.walk(init))
        if not imported:
            continue
        # an early fallback to vLLM's launcher unless a gate function says yes
        for node in fn.body:
            if (isinstance(node, ast.If) and isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
                    and any(isinstance(s, ast.Return) for s in node.body)):
                gate = _function(tree, uc.call_name(node.test.operand))
                gates |= (_env_names(gate) if gate else set()) or {'?' + ast.unparse(node.test)}
        rules.append(True if not gates else ','.join(sorted(gates)))
    assert len(rules) <= 1, 'several vllm-ascend patches replace run_engine_core: %s' % rules
    return rules[0] if rules else False


def test_dense_dp_rank_rule(upstream):
    """dense_dp_keeps_rank (the plan's dense DP ports, pd_instances dense_keeps_rank) is the release's rule, and
    releases.dense_dp_keeps_rank applies it to an engine environment with and without the gate."""
    rule = dense_dp_rule(upstream)
    assert rule == upstream.entry['dense_dp_keeps_rank']
    if isinstance(rule, bool):
        assert releases.dense_dp_keeps_rank(upstream.version, {}) is rule
    else:
        assert releases.dense_dp_keeps_rank(upstream.version, {}) is False
        assert releases.dense_dp_keeps_rank(upstream.version, {rule: '1'}) is True


# ---------------------------------------------------------------------------------------------------------
# l. the literals the roles, plugins and host scripts talk to upstream with (read from the table at run time)


def _get_ip_reads(vl):
    """The variables vLLM's get_ip() reads (vllm/utils/network_utils.py, or vllm/utils/__init__.py before)."""
    for path in [vl / 'vllm' / 'utils' / 'network_utils.py', vl / 'vllm' / 'utils' / '__init__.py']:
        fn = _function(uc.parse(path), 'get_ip') if path.exists() else None
        if fn is not None:
            return _env_names(fn)
    raise AssertionError('no get_ip in vLLM vllm/utils')


def test_runtime_literals(upstream):
    """The routes, keys, names and log line the roles read from the table (pd_release_facts newest=true) are the
    release's: the proxy serves the routes, counts with the key, the connector logs the line, vLLM reads the host
    variable, and the engine serves /health, /v1/models and /metrics."""
    entry = upstream.entry
    assert entry['host_ip_env'] in _get_ip_reads(upstream.vl)
    assert entry['kv_log'].startswith(entry['kv_log_grep'] + ' %s')
    flags, routes, keys, _imports = proxy_facts(upstream.proxy)
    assert entry['proxy_health_route'] in routes
    assert entry['proxy_completions_route'] in routes
    assert file_sd.PROXY_PATH == entry['proxy_health_route']  # the monitoring's blackbox probe of the proxies
    if entry['proxy_remove'] is not None:
        assert {entry['proxy_add_route'], entry['proxy_remove_route']} <= routes
        counted = {n.attr for n in ast.walk(uc.parse(upstream.proxy)) if isinstance(n, ast.Attribute)}
        # a proxy that taints counts requests in flight (0.13.0 drops a member at once and counts nothing)
        assert (entry['proxy_count_key'] in counted) == entry['proxy_remove'].startswith('taint')
        # proxy_member.py tells the 0.23 proxy (an add of a listed member is a no-op) by the count in /healthcheck
        assert (entry['proxy_count_key'] in keys) == (entry['proxy_readd'] == 'noop')
    served = _py_text(upstream.vl, 'vllm/entrypoints/openai', 'vllm/entrypoints/serve')
    for route in entry['engine_routes'].values():
        # a GET or POST route of vLLM's OpenAI server, or a mount (/metrics: the Prometheus app)
        assert re.search(r"""(?:\.get|\.post|Mount)\(\s*["']%s["']""" % re.escape(route), served), route


def _table_reads(tree, name):
    """The keys NAME["key"] (NAME a module-level copy of a release entry) reads in TREE."""
    return {n.slice.value for n in ast.walk(tree) if isinstance(n, ast.Subscript) and getattr(n.value, 'id', None) == name
            and isinstance(n.slice, ast.Constant)}


def test_proxy_member_script(upstream):
    """roles/proxy/files/proxy_member.py (a host script: pd_host_script puts the table in front of it) reads the
    proxy's routes, its count key and the listener's options from the table (UP: the newest supported release's
    facts), names no route of its own but FastAPI's /openapi.json, and reads only the count key of /healthcheck."""
    tree = uc.parse(ROOT / 'roles/proxy/files/proxy_member.py')
    assert sorted(uc.str_constants(tree, r'/[a-z_/.]+') - {'/openapi.json'}) == []
    assert {'proxy_health_route', 'proxy_add_route', 'proxy_remove_route', 'proxy_completions_route', 'proxy_count_key',
            'proxy_wait_flags', 'engine_routes', 'busy_gauges', 'served_counter'} <= _table_reads(tree, 'UP')
    read = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and uc.call_name(node.comparators[0]) == 'healthcheck':
            read.add(ast.unparse(node.left))
        if uc.call_name(node) == 'get' and uc.call_name(node.func.value) == 'healthcheck' and node.args:
            read.add(ast.unparse(node.args[0]))
    assert read == {'COUNT'}
    entry = upstream.entry
    if entry['proxy_remove'] is None:
        return
    # the release's proxy has the options the script reads and the routes it calls (test_runtime_literals)
    assert set(entry['proxy_wait_flags'].values()) <= uc.add_argument_flags(upstream.proxy)


def test_proxy_wait_flags(upstream):
    """proxy_wait_flags are the example proxy's listener options, where it has the admin API, with the defaults
    proxy_member.py assumes when the running proxy's command line has none."""
    entry = upstream.entry
    flags = uc.add_argument_flags(upstream.proxy)
    has_admin = set(releases._ADMIN_ROUTES) <= set(entry['proxy_routes'])
    if entry['proxy_wait_flags'] is None:
        assert not has_admin and not set(releases._PROXY_WAIT.values()) & flags
        return
    assert has_admin and set(entry['proxy_wait_flags'].values()) <= flags
    script = uc.parse(ROOT / 'roles/proxy/files/proxy_member.py')
    assumed = {ast.unparse(c.args[0]): c.args[1].value for c in ast.walk(script)
               if uc.call_name(c) == 'flag' and len(c.args) == 2 and isinstance(c.args[1], ast.Constant)}
    defaults = {}
    for c in ast.walk(uc.parse(upstream.proxy)):
        if uc.call_name(c) == 'add_argument' and c.args and isinstance(c.args[0], ast.Constant):
            for k in c.keywords:
                if k.arg == 'default' and isinstance(k.value, ast.Constant):
                    defaults[c.args[0].value] = k.value.value
    for key, flag in entry['proxy_wait_flags'].items():
        assert assumed.get('wait[%r]' % key) == defaults.get(flag), flag


# ---------------------------------------------------------------------------------------------------------
# m. the OpenAI completion protocol the smoke test, the rolling proof and the load generator speak (verify/smoke.py,
#    verify/loadgen.py, roles/proxy/files/proxy_member.py read it from the table)

# the table's completion_answer keys, by the vLLM protocol classes that have each field
ANSWER_FIELDS = {'id': ('CompletionResponse', 'CompletionStreamResponse'),
                 'choices': ('CompletionResponse', 'CompletionStreamResponse'),
                 'usage': ('CompletionResponse',), 'kv_transfer_params': ('CompletionResponse',),
                 'text': ('CompletionResponseChoice', 'CompletionResponseStreamChoice'),
                 'completion_tokens': ('UsageInfo',), 'error': ('ErrorResponse',),
                 'delta': ('ChatCompletionResponseStreamChoice',), 'content': ('DeltaMessage',)}


def protocol_fields(vl):
    """{class name: its annotated fields} of the pydantic classes of vLLM's OpenAI server (vllm/entrypoints)."""
    out = {}
    for path in sorted((vl / 'vllm' / 'entrypoints').rglob('*protocol*.py')):
        for node in uc.parse(path).body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, set()).update(
                    s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
    return out


def test_completion_request_and_answer(upstream):
    """Every key the collection sends in a completion request (completion_request) is a field of vLLM's
    CompletionRequest, and every key it reads of the answer (completion_answer) a field of the class that answers it."""
    entry = upstream.entry
    fields = protocol_fields(upstream.vl)
    assert sorted(v for v in entry['completion_request'].values() if v not in fields['CompletionRequest']) == []
    assert sorted(entry['completion_answer']) == sorted(ANSWER_FIELDS)
    missing = ['%s.%s' % (cls, entry['completion_answer'][key]) for key, classes in sorted(ANSWER_FIELDS.items())
               for cls in classes if entry['completion_answer'][key] not in fields.get(cls, ())]
    assert missing == []


def _header_gets(tree, header):
    """The calls X.headers.get(HEADER, ...) in TREE."""
    return [n for n in ast.walk(tree) if uc.call_name(n) == 'get' and isinstance(n.func.value, ast.Attribute)
            and n.func.value.attr == 'headers' and n.args and isinstance(n.args[0], ast.Constant)
            and n.args[0].value == header]


def test_request_id_header(upstream):
    """vLLM's OpenAI server builds its request id from request_id_header (_base_request_id) and answers a completion
    with the id "cmpl-<that id>", and the example proxy sends the header (its own id) with its requests to P and D: so
    the id of the proxy's answer is the id D logs (smoke.trace_of)."""
    header = upstream.entry['request_id_header']
    served = sorted((upstream.vl / 'vllm' / 'entrypoints').rglob('*.py'))
    base = [fn for p in served for fn in ast.walk(uc.parse(p))
            if isinstance(fn, ast.FunctionDef) and fn.name == '_base_request_id']
    assert base and all(_header_gets(fn, header) for fn in base), 'vLLM reads no %s in _base_request_id' % header
    cmpl = [n for p in served if p.parent.name in ('openai', 'completion') and 'serving' in p.name
            for n in ast.walk(uc.parse(p)) if isinstance(n, ast.JoinedStr) and n.values
            and isinstance(n.values[0], ast.Constant) and n.values[0].value == 'cmpl-' and len(n.values) > 1
            and uc.call_name(getattr(n.values[1], 'value', None)) == '_base_request_id']
    assert cmpl, 'the completion id is no longer "cmpl-" + the request id'
    sent = [n for n in ast.walk(uc.parse(upstream.proxy)) if isinstance(n, ast.Dict)
            and any(isinstance(k, ast.Constant) and k.value == header for k in n.keys)]
    assert sent, 'the example proxy sends no %s' % header


def test_completion_stream(upstream):
    """A streamed completion is server-sent events: `data: ` lines, the last `data: [DONE]` (completion_stream)."""
    stream = upstream.entry['completion_stream']
    served = [p for p in sorted((upstream.vl / 'vllm' / 'entrypoints' / 'openai').rglob('*.py'))
              if p.parent.name in ('openai', 'completion') and 'serving' in p.name and 'completion' in str(p)]
    assert served, 'no completion serving module in vllm/entrypoints/openai'
    consts = set().union(*(uc.str_constants(uc.parse(p), r'data: .*\s*') for p in served))
    assert '%s %s\n\n' % (stream['data'], stream['done']) in consts


def prefill_request(path, kv_key):
    """(the constant entries of the kv_transfer_params dict the example proxy sets on its prefill request, the
    constants it sets on that request unconditionally), read from the function that sets them."""
    for fn in ast.walk(uc.parse(path)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params, sets = None, {}
        for stmt in fn.body:
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
            if not (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)):
                continue
            if target.slice.value == kv_key and isinstance(stmt.value, ast.Dict):
                params = {k.value: v.value for k, v in zip(stmt.value.keys, stmt.value.values)
                          if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
            elif isinstance(stmt.value, ast.Constant):
                sets[target.slice.value] = stmt.value.value
        if params is not None:
            return params, sets
    raise AssertionError('the example proxy sets no %s on a request' % kv_key)


def test_proxy_prefill_request(upstream):
    """The rolling proof sends P what the example proxy sends it (proxy_prefill_request: its kv_transfer_params and
    the stream, max_tokens and min_tokens it sets), and then D the kv_transfer_params of P's answer, as the proxy does."""
    entry = upstream.entry
    kv_key = entry['completion_request']['kv_transfer_params']
    table = dict(entry['proxy_prefill_request'])
    params, sets = prefill_request(upstream.proxy, kv_key)
    assert table.pop(kv_key) == params
    assert table == {k: v for k, v in sets.items() if k in table} and sorted(table) == sorted(
        k for k in sets if k in entry['completion_request'].values())
    reads = [n for n in ast.walk(uc.parse(upstream.proxy)) if uc.call_name(n) == 'get' and n.args
             and isinstance(n.args[0], ast.Constant) and n.args[0].value == entry['completion_answer']['kv_transfer_params']]
    assert reads, 'the example proxy reads no %s of P\'s answer' % entry['completion_answer']['kv_transfer_params']


def _environ_reads(path):
    """The names PATH reads with os.environ.get(NAME) or os.getenv(NAME)."""
    return {n.args[0].value for n in ast.walk(uc.parse(path)) if isinstance(n, ast.Call) and n.args
            and isinstance(n.args[0], ast.Constant)
            and (uc.call_name(n) == 'get' and getattr(n.func.value, 'attr', None) == 'environ' or uc.call_name(n) == 'getenv')}


def test_proxy_api_key_env(upstream):
    """The example proxy reads the key it sends P and D from proxy_api_key_env (the proxy role's env file sets it), and
    `vllm bench serve` (pd_bench passes it the key there) reads the same variable."""
    name = upstream.entry['proxy_api_key_env']
    assert name in _environ_reads(upstream.proxy)
    assert name in _environ_reads(upstream.vl / 'vllm' / 'benchmarks' / 'lib' / 'endpoint_request_func.py')
