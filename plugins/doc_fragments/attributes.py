# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type


class ModuleDocFragment(object):
    # The attributes every module of the collection has. A module adds support and details of
    # check_mode and diff_mode (or takes READ_ONLY); platform is the same for all (they read /proc).
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
    details: Linux only (reads C(/proc)).
"""

    # A module that only reads: vllm_pd.ascend.attributes.read_only, after vllm_pd.ascend.attributes.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    details: The module only reads; it behaves the same in check mode.
  diff_mode:
    support: none
"""
