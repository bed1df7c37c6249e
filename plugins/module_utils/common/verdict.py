# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What action pd_verdict answers: show what there is to show, refuse with what there is to refuse, in one task
(issue 36: a debug task and an assert or fail task cost two tasks on every host, mostly skipped). Pure function."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type


def verdict(show, refuse):
    """The task result for SHOW (shown like debug's msg when not empty) and REFUSE (the failure's msg when not
    empty; what there was to show stays in the result as 'shown'). Empty both: an ok result that shows nothing."""
    if refuse:
        result = {'changed': False, 'failed': True, 'msg': refuse}
        if show:
            result['shown'] = show
        return result
    if show:
        # the default callback prints the result of a task that sets this, as it does debug's
        return {'changed': False, 'msg': show, '_ansible_verbose_always': True}
    return {'changed': False}
