# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OrphanInstance (issue 21): vllm_pd units on a host that no inventory entry explains (the host left a
group, an earlier layout). They keep NPUs, ports and proxy membership; the preflight and the doctor name
them, and they go only when the operator sets vllm_pd_remove_orphans."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

NAME = 'OrphanInstance'
OURS = re.compile(r'^vllm-pd-(prefill|decode)[^ ]*\.service$|^vllm-pd-proxy\.service$')


def orphan_units(unit_lines, planned_units, is_proxy):
    """UNIT_LINES: `systemctl list-units --plain --no-legend` lines (first word the unit); PLANNED_UNITS: the
    units of the host's planned instances; IS_PROXY: the host runs its cluster's proxy -> orphan unit names."""
    keep = set(planned_units) | (set(['vllm-pd-proxy.service']) if is_proxy else set())
    out = []
    for line in unit_lines:
        words = str(line).split()
        if words and OURS.match(words[0]) and words[0] not in keep and words[0] not in out:
            out.append(words[0])
    return out
