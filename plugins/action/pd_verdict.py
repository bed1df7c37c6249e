# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action pd_verdict: runs on the controller only (no connection, nothing sent to the host); the answer is
module_utils/common/verdict.py's."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.verdict import verdict


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(('show', 'refuse'))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=dict(show=dict(type='raw', default=[]),
                                                              refuse=dict(type='raw', default=[])))[1]
        result.update(verdict(args['show'], args['refuse']))
        return result
