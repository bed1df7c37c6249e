# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the vllm-ascend release an inventory names.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.rules_view import hfind, show


def rule_vllm_ascend_version(view):
    """The release decides which abort-timeout variable the engines get (engine_env.abort_timeout_names)."""
    for h in view.hosts:
        raw = view.get(h, "vllm_pd_vllm_ascend_version")
        if raw is None or (isinstance(raw, str) and raw.strip() == ""):
            continue
        try:
            releases.parse_version(raw)
        except ValueError:
            yield hfind(view, h, "vllm_pd_vllm_ascend_version", "vllm_pd_vllm_ascend_version=%s is not a vllm-ascend "
                        "release" % show(raw), "write it as the release tag, e.g. v0.23.0 or v0.18.0rc1")
