# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Mooncake port-group formula, the one place it is written (issue 36 "One plan computed once").

In common because every stage needs it: the inventory rules and the plan (filter pd_instances), the parameter
checks (common/params.py), the port checks (ports/port_group.py's port_group lists the ports), the start guard
and the doctor. Pure functions, no imports of the collection.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from collections import namedtuple

GroupBounds = namedtuple('GroupBounds', ['first', 'last', 'width', 'size'])


def group_bounds(kv_port, tp_size=1, pp_size=1, pcp_size=1, dp_rank_start=0, dp_size_local=1):
    """GroupBounds(first, last, width, size) of the ports a producer instance binds; the formula is written here
    only (tests/unit/plugins/module_utils/test_one_port_formula.py fails on a copy).

    side_channel_port = kv_port + dp_rank * tp * pp * pcp (the DP stride); each worker binds
    side_channel_port + (pp_rank * pcp + pcp_rank) * tp + tp_rank, which runs over [0, tp * pp * pcp)
    (vllm-ascend 0.23 mooncake_connector.py 1650-1657, 2029-2038; 0.18 has the same ports with pp and pcp
    exclusive). A consumer (decode) binds none of them. pp_size and pcp_size default to 1.
    The DP ranks dp_rank_start .. + dp_size_local - 1 are consecutive, so the group is every port
    first..last; width (tp * pp * pcp) is what one DP rank takes, ports and NPUs; size is width * dp_size_local.
    """
    for name, value in (('tp_size', tp_size), ('pp_size', pp_size),
                        ('pcp_size', pcp_size), ('dp_size_local', dp_size_local)):
        if value < 1:
            raise ValueError('%s must be >= 1, got %d' % (name, value))
    if dp_rank_start < 0:
        raise ValueError('dp_rank_start must be >= 0, got %d' % dp_rank_start)
    width = tp_size * pp_size * pcp_size
    first = kv_port + dp_rank_start * width
    size = dp_size_local * width
    return GroupBounds(first, first + size - 1, width, size)


def group_width(tp_size=1, pp_size=1, pcp_size=1):
    """Ports (and NPUs) one DP rank takes: group_bounds' width."""
    return group_bounds(0, tp_size, pp_size, pcp_size).width
