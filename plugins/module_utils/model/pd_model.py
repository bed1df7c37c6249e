# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a model directory is: MoE or dense (as vLLM decides it) and a fingerprint of the files that
must be identical on P and D (config.json and the tokenizer files).

Pure functions, plus one reader of a directory (read_model_dir) that only opens the named files, and the
facts the modules pd_model_facts and pd_host_read return (model_facts, over read_file).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import hashlib
import json
import os

# vLLM ModelConfig.is_moe: the first of these keys in the text config, > 0 means MoE (a list: element 0).
VLLM_EXPERT_KEYS = ('num_experts', 'moe_num_experts', 'n_routed_experts', 'num_local_experts')
# Files hashed for the model identity: config.json, generation_config.json (default sampling) and every
# tokenizer file transformers reads; those absent are skipped (a model has one tokenizer format).
IDENTITY_FILES = ('config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json',
                  'tokenizer.model', 'vocab.json', 'merges.txt', 'special_tokens_map.json', 'added_tokens.json')


# transformers' PretrainedConfig.get_text_config (what vLLM's get_hf_text_config calls): the sub-config under one of
# these names is the text model's; more than one is ambiguous (transformers raises ValueError).
TEXT_CONFIG_NAMES = ('text_encoder', 'decoder', 'generator', 'text_config')


def _sub_configs(config):
    return [n for n in TEXT_CONFIG_NAMES if isinstance(config, dict) and config.get(n) is not None]


def text_config(config):
    """The config vLLM reads the text model from: the one sub-config of TEXT_CONFIG_NAMES, else the config itself."""
    names = _sub_configs(config)
    if len(names) == 1 and isinstance(config[names[0]], dict):
        return config[names[0]]
    return config if isinstance(config, dict) else {}


def _block_experts(cfg):
    """vLLM's fallback for heterogeneous models (NemotronH): the most routed experts of a block_configs MoE block."""
    most = 0
    for block in cfg.get('block_configs') or []:
        if isinstance(block, dict) and block.get('block_type') == 'moe':
            try:
                most = max(most, int(block.get('n_routed_experts') or 0))
            except (TypeError, ValueError):
                pass
    return most


def expert_count(config):
    """Experts per vLLM's rule (model_arch_config_convertor get_num_experts): the first present key of
    VLLM_EXPERT_KEYS (None counts as 0, a list its first element), else the MoE blocks of block_configs."""
    cfg = text_config(config)
    count = 0
    for key in VLLM_EXPERT_KEYS:
        if key in cfg:
            value = cfg[key]
            if isinstance(value, (list, tuple)):
                value = value[0] if value else 0
            try:
                count = int(value or 0)
            except (TypeError, ValueError):
                count = 0
            break
    return count or _block_experts(cfg)


def _expert_paths(node, path=''):
    """Where expert keys (VLLM_EXPERT_KEYS with a value > 0) sit in NODE, as dotted paths of their dicts."""
    out = []
    if isinstance(node, dict):
        if any(node.get(k) not in (None, 0, [], False) for k in VLLM_EXPERT_KEYS):
            out.append(path or '(top level)')
        for key, value in node.items():
            if isinstance(value, (dict, list)):
                out += _expert_paths(value, '%s.%s' % (path, key) if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _expert_paths(value, '%s[%d]' % (path, i))
    return out


def kind_problem(config):
    """A sentence when this reading cannot tell what vLLM makes of CONFIG (MoE or dense), else None."""
    names = _sub_configs(config)
    if len(names) > 1:
        return ('config.json has more than one text sub-config (%s): transformers refuses to choose, so the model kind '
                'is unknown here' % ', '.join(names))
    if expert_count(config) > 0:
        return None
    chosen = names[0] if names else ''
    elsewhere = [p for p in _expert_paths(config) if p != (chosen or '(top level)') and not p.startswith('block_configs')
                 and not (chosen and p.startswith(chosen + '.block_configs'))]
    if elsewhere:
        return ('config.json has expert keys under %s, a sub-config vLLM reads only through the model\'s own config class, '
                'so whether vLLM runs it as MoE is unknown here' % ', '.join(elsewhere))
    return None


def model_kind(config):
    """'moe' when vLLM treats the model as MoE (its DP ranks stay one group), 'dense', or None when unknown
    (kind_problem says why)."""
    if expert_count(config) > 0:
        return 'moe'
    return None if kind_problem(config) else 'dense'


def ascend_moe(config):
    """vllm-ascend's own test (utils.py): any key of the text config that contains 'expert'."""
    return any('expert' in str(k) for k in text_config(config))


def fingerprint(file_hashes):
    """One sha256 over 'name sha256' lines of the identity files, in name order."""
    h = hashlib.sha256()
    for name in sorted(file_hashes):
        h.update(('%s %s\n' % (name, file_hashes[name])).encode())
    return h.hexdigest()


def resolve_kind(setting, detected):
    """vllm_pd_model_kind (auto, moe, dense) against what config.json says (moe, dense, or None)."""
    if setting in ('moe', 'dense'):
        return setting
    if setting != 'auto':
        raise ValueError('vllm_pd_model_kind=%s is not one of auto, moe, dense' % setting)
    return detected or 'unknown'


def read_model_dir(path, read_bytes):
    """Facts of the model at PATH. READ_BYTES(path) returns bytes or None when missing.

    Returns exists, kind (moe/dense/None), experts, ascend_moe, max_position_embeddings, files {name: sha256},
    fingerprint, error.
    """
    out = {'path': path, 'exists': False, 'kind': None, 'experts': 0, 'ascend_moe': False, 'max_position_embeddings': None,
           'files': {}, 'fingerprint': '', 'error': ''}
    config_bytes = read_bytes(os.path.join(path, 'config.json')) if path.startswith('/') else None
    if config_bytes is None:
        out['error'] = ('%s/config.json not found (a model name, not a directory, cannot be checked here)' % path
                        if not path.startswith('/') else '%s/config.json not found' % path)
        return out
    out['exists'] = True
    for name in IDENTITY_FILES:
        data = config_bytes if name == 'config.json' else read_bytes(os.path.join(path, name))
        if data is not None:
            out['files'][name] = hashlib.sha256(data).hexdigest()
    out['fingerprint'] = fingerprint(out['files'])
    try:
        config = json.loads(config_bytes.decode('utf-8'))
    except (ValueError, UnicodeDecodeError) as exc:
        out['error'] = '%s/config.json is not JSON: %s' % (path, exc)
        return out
    out['experts'] = expert_count(config)
    out['kind'] = model_kind(config)
    out['error'] = kind_problem(config) or ''
    out['ascend_moe'] = ascend_moe(config)
    mpe = text_config(config).get('max_position_embeddings')
    out['max_position_embeddings'] = mpe if isinstance(mpe, int) and not isinstance(mpe, bool) else None
    return out


def read_file(path):
    """The bytes of PATH, None when it cannot be read (the READ_BYTES of read_model_dir on a host)."""
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def model_facts(path, kind, read_bytes=read_file):
    """read_model_dir of PATH with resolved_kind: KIND (vllm_pd_model_kind) against what config.json says."""
    facts = read_model_dir(path, read_bytes)
    facts['resolved_kind'] = resolve_kind(kind, facts['kind'])
    return facts
