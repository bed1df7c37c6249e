#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: pd_model_facts
short_description: Read a model directory on an engine host - MoE or dense, and the hash of its files
version_added: "1.0.0"
description:
  - Reads C(config.json) of O(path) and tells whether vLLM treats the model as MoE (the first of
    C(num_experts), C(moe_num_experts), C(n_routed_experts), C(num_local_experts) in C(text_config) or the top level
    is above 0) or dense. vLLM resets the data parallel rank of a dense model to 0, which decides its kv_port groups.
  - Hashes (sha256) C(config.json), C(generation_config.json) and the tokenizer files C(tokenizer.json),
    C(tokenizer_config.json), C(tokenizer.model), C(vocab.json), C(merges.txt), C(special_tokens_map.json),
    C(added_tokens.json), those present, into one fingerprint that must be equal on every engine host of a cluster.
  - Weights are not hashed (too large to read before every start); a different revision changes C(config.json)
    or the tokenizer in practice.
  - Reads only; a missing directory is reported (RV(model.exists) false), not an error.
options:
  path:
    description: The model path given to C(vllm serve) (V(vllm_pd_model)). A name that is not an absolute path is reported as not found.
    type: str
    required: true
  kind:
    description: V(auto) (detect from C(config.json)), V(moe) or V(dense) (V(vllm_pd_model_kind)); returned as RV(model.resolved_kind).
    type: str
    default: auto
    choices: [auto, moe, dense]
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
  - vllm_pd.ascend.attributes.read_only
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Read the model on this engine host
  vllm_pd.ascend.pd_model_facts:
    path: /data/models/Qwen3-8B
  register: model
# model.model.kind == 'dense', model.model.fingerprint == 'ab12...'
"""

RETURN = r"""
model:
  description: What the model directory is.
  returned: always
  type: dict
  contains:
    path:
      description: O(path).
      type: str
    exists:
      description: Whether C(config.json) was found.
      type: bool
    kind:
      description:
        - V(moe) or V(dense) by vLLM's rule (the expert keys of the text config transformers' C(get_text_config) picks,
          else the MoE blocks of C(block_configs)).
        - Null when C(config.json) is missing or not JSON, or when vLLM's reading cannot be told here (more than one
          text sub-config, or expert keys under another sub-config); RV(model.error) says why.
      type: str
    resolved_kind:
      description: O(kind) unless V(auto), else RV(model.kind), V(unknown) when not known.
      type: str
    experts:
      description: Number of routed experts by vLLM's rule (0 for dense).
      type: int
    ascend_moe:
      description: vllm-ascend's own MoE test (any C(text_config) key containing C(expert)).
      type: bool
    max_position_embeddings:
      description: The model's context length from C(config.json) (vLLM's default C(max_model_len)), null when absent.
      type: int
    files:
      description: sha256 of each identity file found, by name.
      type: dict
    fingerprint:
      description: sha256 over the names and hashes of RV(model.files).
      type: str
    error:
      description: Why the kind is not known, empty otherwise.
      type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model.pd_model import model_facts


def main():
    module = AnsibleModule(argument_spec=dict(path=dict(type='str', required=True),
                                              kind=dict(type='str', default='auto', choices=['auto', 'moe', 'dense'])),
                           supports_check_mode=True)
    module.exit_json(changed=False, model=model_facts(module.params['path'], module.params['kind']))


if __name__ == '__main__':
    main()
