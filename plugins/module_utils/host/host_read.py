# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What module pd_host_read makes of a host's answers: which machine it is, its vllm_pd units, which of them
run an engine, and an engine's command line. Pure functions."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# the units the preflight reads (also those of an earlier layout)
UNITS_ARGV = ['systemctl', 'list-units', '--all', '--plain', '--no-legend', '--type=service', 'vllm-pd-*']
# ours and running or about to: a unit between two starts (Restart=on-failure, "activating (auto-restart)") binds
# its API port again a moment later, while the run still checks
ACTIVE_STATES = ('active', 'activating', 'reloading', 'deactivating')
_ENGINE_UNIT = re.compile(r'^vllm-pd-(prefill|decode)')


def machine(boot_id, device, inode):
    """Two inventory names for one machine write one unit path twice: the same running kernel (BOOT_ID) and the same
    /etc/systemd/system (DEVICE and INODE, not following a symlink) prove it. '' when either is unknown (None):
    machine-id is no proof, hosts cloned from one image share it, and so do the lab's containers."""
    boot_id = (boot_id or '').strip()
    if not boot_id or device is None or inode is None:
        return ''
    return '%s %d:%d' % (boot_id, device, inode)


def unit_lines(text):
    """The lines of `systemctl list-units --plain --no-legend` (UNIT LOAD ACTIVE SUB DESCRIPTION)."""
    return (text or '').strip().splitlines()


def active_units(lines):
    """The units of LINES whose ACTIVE column is one of ACTIVE_STATES."""
    return [words[0] for words in (line.split() for line in lines) if len(words) > 2 and words[2] in ACTIVE_STATES]


def engine_units(units):
    """The prefill and decode engine units among UNITS (a proxy's is no engine)."""
    return [u for u in units if _ENGINE_UNIT.match(u)]


def main_pid(text):
    """The pid of `systemctl show --property=MainPID --value` output, None when the unit has no main process."""
    text = (text or '').strip()
    return int(text) if text.isdigit() and text != '0' else None


def cmdline_words(data):
    """The argv words of /proc/PID/cmdline bytes (NUL-separated). Only the command line: the environment may hold
    secrets."""
    return [w.decode('utf-8', 'replace') for w in (data or b'').split(b'\0') if w]
