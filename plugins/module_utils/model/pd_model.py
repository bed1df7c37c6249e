# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a model directory is: MoE or dense (as vLLM decides it) and a fingerprint of the files that
must be identical on P and D (config.json and the tokenizer files).

Pure functions, plus one reader of a directory (read_model_dir) that only opens the named files.
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


def text_config(config):
    """vLLM reads the text part of a multimodal config (text_config) when there is one."""
    inner = config.get('text_config') if isinstance(config, dict) else None
    return inner if isinstance(inner, dict) else (config if isinstance(config, dict) else {})


def expert_count(config):
    """Experts per vLLM's rule: the first present key of VLLM_EXPERT_KEYS; None counts as 0."""
    cfg = text_config(config)
    for key in VLLM_EXPERT_KEYS:
        if key in cfg:
            value = cfg[key]
            if isinstance(value, (list, tuple)):
                value = value[0] if value else 0
            try:
                return int(value or 0)
            except (TypeError, ValueError):
                return 0
    return 0


def model_kind(config):
    """'moe' when vLLM treats the model as MoE (its DP ranks stay one group), else 'dense'."""
    return 'moe' if expert_count(config) > 0 else 'dense'


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
    out['ascend_moe'] = ascend_moe(config)
    mpe = text_config(config).get('max_position_embeddings')
    out['max_position_embeddings'] = mpe if isinstance(mpe, int) and not isinstance(mpe, bool) else None
    return out
