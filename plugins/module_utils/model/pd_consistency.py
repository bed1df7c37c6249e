# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Do P and D of one cluster fit together? Pure rules over what each engine launches with.

P and D launched with settings that do not fit either fail late or serve garbage (field-failures.md
5): --block-size on one side only, another kv_cache_dtype, speculative decoding on one side only,
another model revision, a max_model_len D cannot hold. Each rule returns named findings with both
values and both hosts.

Input of cluster_findings: one dict per engine host and kind:
  host, kind ('prefill'/'decode'), tp (int), settings (effective_settings), model (pd_model_facts'
  model, may be {}), env (the engine environment from inventory), address (VLLM_HOST_IP).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import engine_env

# The checked settings: name -> (vllm serve flag, type). Typed variables vllm_pd_NAME (per side
# prefill_NAME / decode_NAME) render the flag; a flag in the extra args sets it too (it comes later
# on the command line, so vLLM takes it).
# The flags are the release table's serve_flags of the same names (the same in every release it knows).
_FLAG = runtime(None)['serve_flags']
SETTINGS = tuple((name, _FLAG[name], kind) for name, kind in (
    ('served_model_name', 'str'),
    ('dtype', 'str'),
    ('kv_cache_dtype', 'str'),
    ('block_size', 'int'),
    ('max_model_len', 'int'),
    ('quantization', 'str'),
    ('speculative_config', 'json'),
))
FLAGS = dict((flag, (name, kind)) for name, flag, kind in SETTINGS)
# Short forms vLLM accepts for a checked setting (the table's serve_aliases).
ALIASES = dict((alias, _FLAG[name]) for name, alias in runtime(None)['serve_aliases'].items() if _FLAG[name] in FLAGS)

# Finding names (also the names vllm_pd_ignore_checks accepts for these rules).
MODEL_MISMATCH = 'ModelMismatch'
SERVED_NAME_MISMATCH = 'ServedModelNameMismatch'
DTYPE_MISMATCH = 'DtypeMismatch'
KV_CACHE_DTYPE_MISMATCH = 'KvCacheDtypeMismatch'
BLOCK_SIZE_MISMATCH = 'BlockSizeMismatch'
MAX_MODEL_LEN_MISMATCH = 'MaxModelLenMismatch'
QUANTIZATION_MISMATCH = 'QuantizationMismatch'
SPEC_DECODE_MISMATCH = 'SpecDecodeMismatch'
TP_NOT_MULTIPLE = 'TpNotMultiple'
INTRA_ROCE_MISSING = 'IntraRoceMissing'
ENGINE_ENV_MISMATCH = 'EngineEnvMismatch'
CHECK_NAMES = (MODEL_MISMATCH, SERVED_NAME_MISMATCH, DTYPE_MISMATCH, KV_CACHE_DTYPE_MISMATCH, BLOCK_SIZE_MISMATCH,
               MAX_MODEL_LEN_MISMATCH, QUANTIZATION_MISMATCH, SPEC_DECODE_MISMATCH, TP_NOT_MULTIPLE,
               INTRA_ROCE_MISSING, ENGINE_ENV_MISMATCH)
EQUAL_RULES = (('served_model_name', SERVED_NAME_MISMATCH), ('dtype', DTYPE_MISMATCH),
               ('kv_cache_dtype', KV_CACHE_DTYPE_MISMATCH), ('block_size', BLOCK_SIZE_MISMATCH),
               ('quantization', QUANTIZATION_MISMATCH))
# Engine variables that must be equal on P and D: RoCE between the two ends must use the same
# transport (HCCL_INTRA_ROCE_ENABLE), retransmit timing and traffic class/service level, or the
# transfer times out or is dropped by the fabric's QoS (ascend-node-facts §5, §6).
# The release table's pd_match_env and intra_roce_env (the same in every release it knows).
MUST_MATCH_ENV = runtime(None)['pd_match_env']
INTRA_ROCE = runtime(None)['intra_roce_env']
DEFAULTS_SHOWN = {'block_size': 'unset (platform default 128)', 'kv_cache_dtype': 'unset (auto, the model dtype)',
                  'dtype': 'unset (auto)', 'quantization': 'unset (none or from config.json)',
                  'speculative_config': 'unset (no speculative decoding)', 'served_model_name': 'unset (the model path)',
                  'max_model_len': 'unset (from config.json)'}


def _convert(name, kind, value, where):
    if value is None or (isinstance(value, str) and value.strip() == ''):
        return None
    if kind == 'int':
        try:
            if isinstance(value, bool):
                raise ValueError
            return int(str(value).strip())
        except ValueError:
            raise ValueError('%s: %s=%r is not a whole number' % (where, name, value))
    if kind == 'json':
        if isinstance(value, dict):
            return value
        try:
            parsed = json.loads(value)
        except ValueError:
            raise ValueError('%s: %s=%r is not JSON' % (where, name, value))
        if not isinstance(parsed, dict):
            raise ValueError('%s: %s=%r is not a JSON object' % (where, name, value))
        return parsed
    if isinstance(value, (list, tuple)):
        return ' '.join(str(v) for v in value)
    return str(value)


def parse_extra_args(words):
    """The checked settings set by argv words: '--block-size 128' and '--block-size=128' forms.

    Returns {name: raw value}; the last occurrence wins, as in argparse.
    """
    found = {}
    words = [str(w) for w in (words or [])]
    i = 0
    while i < len(words):
        word = words[i]
        flag, value, has_value = word, None, False
        if word.startswith('-') and '=' in word:
            flag, value = word.split('=', 1)
            has_value = True
        flag = ALIASES.get(flag, flag)
        if flag in FLAGS:
            name = FLAGS[flag][0]
            if not has_value:
                if i + 1 < len(words):
                    value = words[i + 1]
                    i += 1
                if name == 'served_model_name':  # nargs='+': the first name is what clients send
                    while i + 1 < len(words) and not words[i + 1].startswith('-'):
                        i += 1
            found[name] = value
        i += 1
    return found


def effective_settings(typed, extra_args, where='this host'):
    """What the engine launches with: a flag in EXTRA_ARGS wins over the typed variable.

    TYPED: {name: value or None}. Returns {name: converted value or None, name + '_source': variable}.
    """
    typed = typed or {}
    words = parse_extra_args(extra_args)
    out = {}
    for name, flag, kind in SETTINGS:
        if name in words:
            out[name] = _convert(name, kind, words[name], where)
            out[name + '_source'] = 'extra args %s' % flag
        else:
            out[name] = _convert(name, kind, typed.get(name), where)
            out[name + '_source'] = name
    return out


def setting_args(settings):
    """argv words of the typed settings that are set, in SETTINGS order."""
    argv = []
    for name, flag, kind in SETTINGS:
        value = _convert(name, kind, (settings or {}).get(name), 'settings')
        if value is None:
            continue
        argv += [flag, json.dumps(value, sort_keys=True, separators=(',', ':')) if kind == 'json' else str(value)]
    return argv


def _show(name, value):
    if value is None:
        return DEFAULTS_SHOWN.get(name, 'unset')
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _label(engine):
    return '%s %s' % (engine['kind'], engine['host'])


def _finding(name, message, a=None, b=None):
    f = {'name': name, 'message': '[%s] %s' % (name, message)}
    if a is not None:
        f['hosts'] = sorted(set([a['host'], b['host']]))
    return f


def _pairs(engines):
    """Each P with each D (the pairs that exchange KV)."""
    ps = [e for e in engines if e['kind'] == 'prefill']
    ds = [e for e in engines if e['kind'] == 'decode']
    return [(p, d) for p in ps for d in ds]


def _first_of_each_value(engines, key):
    """One engine per distinct value of KEY, so N hosts with 2 values give one finding, not N*N."""
    seen = {}
    for e in engines:
        seen.setdefault(json.dumps(key(e), sort_keys=True, default=str), e)
    return list(seen.values())


def model_findings(engines):
    have = [e for e in engines if (e.get('model') or {}).get('fingerprint')]
    distinct = _first_of_each_value(have, lambda e: e['model']['fingerprint'])
    out = []
    for other in distinct[1:]:
        a = distinct[0]
        files_a, files_b = a['model'].get('files', {}), other['model'].get('files', {})
        differ = sorted(n for n in set(files_a) | set(files_b) if files_a.get(n) != files_b.get(n))
        out.append(_finding(MODEL_MISMATCH, '%s on %s has model fingerprint %s, %s on %s has %s (files that differ: %s). P and D '
                            'must run the same model and tokenizer, or D decodes KV it cannot read. Fix: install the same '
                            'model revision on every engine host' % (
                                a['model'].get('path'), _label(a), a['model']['fingerprint'][:16], other['model'].get('path'),
                                _label(other), other['model']['fingerprint'][:16], ', '.join(differ)), a, other))
    return out


def equal_setting_findings(engines):
    out = []
    for name, finding in EQUAL_RULES:
        distinct = _first_of_each_value(engines, lambda e, n=name: e['settings'].get(n))
        for other in distinct[1:]:
            a = distinct[0]
            out.append(_finding(finding, '%s: %s on %s (%s), %s on %s (%s). P and D must launch with the same %s. Fix: set '
                                'vllm_pd_%s once for the cluster (and drop prefill_%s/decode_%s or the flag in the extra args)' % (
                                    name, _show(name, a['settings'].get(name)), _label(a), a['settings'].get(name + '_source', name),
                                    _show(name, other['settings'].get(name)), _label(other),
                                    other['settings'].get(name + '_source', name), name, name, name, name), a, other))
    return out


def _max_len(engine):
    value = engine['settings'].get('max_model_len')
    if value is None:
        value = (engine.get('model') or {}).get('max_position_embeddings')
    return value


def _unread(engine, value):
    """An unknown max_model_len of a host this run did not read (outside --limit) is no fact: not compared."""
    return value is None and not engine.get('model_read', True)


def max_model_len_findings(engines):
    out = []
    for p, d in _first_of_each_value(_pairs(engines), lambda pair: [_max_len(pair[0]), _max_len(pair[1])]):
        pl, dl = _max_len(p), _max_len(d)
        if _unread(p, pl) or _unread(d, dl):
            continue
        if pl is None or dl is None:
            if pl != dl:
                out.append(_finding(MAX_MODEL_LEN_MISMATCH, 'max_model_len: %s on %s, %s on %s; one side is not known '
                                    '(no vllm_pd_max_model_len and no config.json). Fix: set vllm_pd_max_model_len' % (
                                        _show('max_model_len', pl), _label(p), _show('max_model_len', dl), _label(d)), p, d))
        elif dl < pl:
            out.append(_finding(MAX_MODEL_LEN_MISMATCH, 'max_model_len: %s on %s, %s on %s; D cannot hold a prompt P accepts. '
                                'Fix: give D at least P\'s max_model_len (vllm_pd_max_model_len)' % (pl, _label(p), dl, _label(d)),
                                p, d))
    return out


def spec_decode_findings(engines):
    """Speculative decoding on both sides or neither (one-sided: D fails with 'list index out of range');
    the same method; D proposes at least as many tokens as P (ascend-node-facts §5: P 1, D >= 1)."""
    out = []

    def spec_of(pair):
        return [pair[0]['settings'].get('speculative_config'), pair[1]['settings'].get('speculative_config')]

    for p, d in _first_of_each_value(_pairs(engines), spec_of):
        ps, ds = p['settings'].get('speculative_config'), d['settings'].get('speculative_config')
        problem = ''
        if (ps is None) != (ds is None):
            problem = 'speculative decoding on one side only'
        elif ps is not None:
            if ps.get('method') != ds.get('method'):
                problem = 'different methods'
            elif int(ds.get('num_speculative_tokens') or 0) < int(ps.get('num_speculative_tokens') or 0):
                problem = 'D proposes fewer speculative tokens than P'
        if problem:
            out.append(_finding(SPEC_DECODE_MISMATCH, 'speculative_config: %s on %s, %s on %s (%s). Fix: set '
                                'vllm_pd_speculative_config for both sides (per side prefill_/decode_speculative_config '
                                'only for num_speculative_tokens)' % (
                                    _show('speculative_config', ps), _label(p), _show('speculative_config', ds), _label(d),
                                    problem), p, d))
    return out


def tp_findings(engines):
    out = []
    for p, d in _first_of_each_value(_pairs(engines), lambda pair: [pair[0]['tp'], pair[1]['tp']]):
        if int(p['tp']) < int(d['tp']) or int(p['tp']) % int(d['tp']):
            out.append(_finding(TP_NOT_MULTIPLE, 'tensor parallel size %s on %s is not a multiple of %s on %s; '
                                'vllm-ascend refuses it. Fix: make vllm_pd_prefill_tp_size a multiple of '
                                'vllm_pd_decode_tp_size' % (p['tp'], _label(p), d['tp'], _label(d)), p, d))
    return out


def _env(engine, key):
    value = (engine.get('env') or {}).get(key)
    return None if value is None else str(value)


def intra_roce_findings(engines):
    """P and D on one host (or one address) move KV over HCCS unless HCCL_INTRA_ROCE_ENABLE=1 (#4866)."""
    out = []
    for p, d in _pairs(engines):
        same = p['host'] == d['host'] or (p.get('address') and p.get('address') == d.get('address'))
        if same and (_env(p, INTRA_ROCE) != '1' or _env(d, INTRA_ROCE) != '1'):
            out.append(_finding(INTRA_ROCE_MISSING, 'prefill and decode both run on %s, but %s is %s for '
                                'prefill and %s for decode; on one host the transfer needs RoCE. Fix: set '
                                '%s: "1" in vllm_pd_engine_env' % (
                                    p['host'] if p['host'] == d['host'] else p['host'] + ' and ' + d['host'], INTRA_ROCE,
                                    _env(p, INTRA_ROCE) or 'unset', _env(d, INTRA_ROCE) or 'unset', INTRA_ROCE),
                                p, d))
    return out


def engine_env_findings(engines):
    out = []
    for key in MUST_MATCH_ENV:
        distinct = _first_of_each_value(engines, lambda e, k=key: _env(e, k))
        for other in distinct[1:]:
            a = distinct[0]
            values = (key, _env(a, key) or 'unset', _label(a), _env(other, key) or 'unset', _label(other))
            out.append(_finding(ENGINE_ENV_MISMATCH, '%s is %s on %s and %s on %s; it must be equal on P and D. Fix: set it '
                                'once in vllm_pd_engine_env' % values, a, other))
    return out


def cluster_findings(engines):
    """Every finding of one cluster, rule by rule (see the module docstring for ENGINES)."""
    out = []
    for rule in (model_findings, equal_setting_findings, max_model_len_findings, spec_decode_findings, tp_findings,
                 intra_roce_findings, engine_env_findings, engine_env.transfer_timeout_findings):
        out += rule(engines)
    return out


def split_ignored(findings, ignore):
    """(failing, shown) by finding name, as vllm_pd_ignore_checks lists them: a finding marked
    'warning' never fails, it is shown unless ignored; an ignored finding is shown, not failing."""
    ignore = set(ignore or [])
    failing = [f for f in findings if f['name'] not in ignore and not f.get('warning')]
    shown = [f for f in findings if (f['name'] in ignore) != bool(f.get('warning'))]
    return failing, shown
