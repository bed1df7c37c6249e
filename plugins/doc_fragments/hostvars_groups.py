# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type


class ModuleDocFragment(object):
    # The input of the filters that read the inventory's hosts: hostvars piped in, groups as an option.
    DOCUMENTATION = r"""
options:
  _input:
    description: hostvars.
    type: dict
    required: true
  groups:
    description: The inventory groups (C(groups)).
    type: dict
    required: true
"""
