#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# This module is implemented by the action plugin plugins/action/pd_verdict.py: it runs on the controller.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: pd_verdict
short_description: Show findings and refuse on others in one task, on the controller
version_added: "1.2.0"
description:
  - Shows O(show) as M(ansible.builtin.debug) shows its C(msg), and fails the host with O(refuse) as its message; one
    task where a debug task and an assert or fail task ran on every host, mostly skipped (issue 36).
  - With both, the task fails with O(refuse), and O(show) stays in the result (RV(shown)), so nothing to be shown
    is lost.
  - With neither, the task is ok and shows nothing.
  - Runs on the controller; it contacts no host.
options:
  show:
    description: What to show (a string or a list); nothing when empty.
    type: raw
    default: []
  refuse:
    description: The failure message (a string or a list); the host fails when it is not empty.
    type: raw
    default: []
attributes:
  action:
    description: Runs as an action plugin on the controller.
    support: full
  platform:
    support: N/A
    platforms: all
    details: Runs on the controller; it contacts no host.
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
  - vllm_pd.ascend.attributes.read_only
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Show the warnings of this host; refuse with its errors
  vllm_pd.ascend.pd_verdict:
    show: "{{ warnings }}"
    refuse: "{{ ['cluster a has 1 error:'] + errors if errors else [] }}"
"""

RETURN = r"""
msg:
  description: What was shown, or the refusal.
  returned: when O(show) or O(refuse) is not empty
  type: raw
shown:
  description: O(show), when the task failed with O(refuse).
  returned: when both are not empty
  type: raw
"""
