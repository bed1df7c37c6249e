#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: mooncake_residue
short_description: Remove stale Mooncake / Ascend files that no live process uses
version_added: "1.0.0"
description:
  - Removes the leftovers of earlier Mooncake Transfer Engine and Ascend runs
    (C(/tmp/mooncake*), C(/tmp/transfer_engine*), C(/dev/shm/*mooncake*), C(/dev/shm/*ascend*) by default)
    before vLLM starts.
  - A file is kept when a live process has it open (C(/proc/*/fd)), maps it (C(/proc/*/maps)), or it is the
    path of a live unix socket (C(/proc/net/unix)). A matching directory is removed only when nothing inside
    it is in use. Kept entries are returned with the holder pid and process name.
  - Symlinks are never followed; a matching symlink is removed itself, not its target. Only the last
    component of a pattern may contain wildcards, so nothing outside the pattern's directory is touched.
  - A pattern's directory must be C(/tmp), C(/var/tmp) or C(/dev/shm) or a directory below them, reached
    without a symlink at any level (each directory is opened with C(O_NOFOLLOW) from C(/) down, and
    removal works on those directory descriptors); any other pattern is refused.
options:
  patterns:
    description:
      - Absolute glob patterns to clear. Only the last path component may contain wildcards, and it needs a
        literal part (V(/tmp/*) is refused).
      - The directory part must lie in C(/tmp), C(/var/tmp) or C(/dev/shm) (V(/etc/passwd*) is refused) and
        contain no symlink.
    type: list
    elements: str
    default: ['/tmp/mooncake*', '/tmp/transfer_engine*', '/dev/shm/*mooncake*', '/dev/shm/*ascend*']
  log_dirs:
    description:
      - Directories whose old C(*.log) files are pruned (with O(log_retention_days) > 0), walked without following
        symlinks, e.g. C(~/ascend/log) (vllm-ascend 0.23 writes every vLLM log line to
        C(~/ascend/log/vllm_ascend/vllm_ascend_<ts>_<pid>.log), a new file each start, and CANN its plogs there or
        under C(ASCEND_PROCESS_LOG_PATH)). C(~) is the home of the user the module runs as.
      - Only regular files named C(*.log) are removed; a file a live process holds open or mapped is kept. A system
        directory (C(/etc), C(/usr), ...) or a path through a symlink is refused.
    type: list
    elements: path
    default: []
  log_retention_days:
    description: Remove a log of O(log_dirs) last changed more than this many days ago; V(0) removes none.
    type: int
    default: 0
attributes:
  check_mode:
    support: full
    details: RV(removed) lists what would be removed; nothing is deleted.
  diff_mode:
    support: full
    details: Shows the matching entries before and after.
notes:
  - Run with C(become) so that every process's open files are visible; a file held by an invisible process
    would be taken as unused.
  - Run it after the vLLM services are stopped and before they start.
seealso:
  - module: vllm_pd.ascend.kv_port_group
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Clear Mooncake leftovers before starting vLLM
  vllm_pd.ascend.mooncake_residue:
  become: true

- name: Prune the engine logs under ~/ascend/log older than 14 days (never one a running engine writes)
  vllm_pd.ascend.mooncake_residue:
    patterns: []
    log_dirs: [~/ascend/log]
    log_retention_days: 14
  become: true

- name: Clear an extra pattern too
  vllm_pd.ascend.mooncake_residue:
    patterns:
      - /tmp/mooncake*
      - /dev/shm/*mooncake*
      - /var/tmp/vllm_ascend_*
  become: true
"""

RETURN = r"""
removed:
  description: Entries removed (in check mode, entries that would be removed).
  returned: always
  type: list
  elements: str
  sample: [/dev/shm/mooncake_seg_0, /tmp/transfer_engine.lock]
pruned_logs:
  description: Old logs of O(log_dirs) removed (in check mode, that would be removed).
  returned: always
  type: list
  elements: str
  sample: [/root/ascend/log/vllm_ascend/vllm_ascend_20261101_120000_4711.log]
kept_in_use:
  description: Matching entries (and old logs) kept because a live process uses them (or a file inside them).
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The matching entry.
      type: str
    in_use_path:
      description: The file in use (the entry itself or a file inside the directory).
      type: str
    pid:
      description: First holder pid.
      type: int
    pids:
      description: All holder pids.
      type: list
      elements: int
    process:
      description: Process name of the first holder.
      type: str
  sample:
    - {path: /dev/shm/ascend_hbm_0, in_use_path: /dev/shm/ascend_hbm_0, pid: 4711, pids: [4711], process: vllm}
"""

import errno

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

import time

from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.residue import (
    DEFAULT_PATTERNS, old_logs, pattern_base, plan, remove_entry,
)

PROC_ROOT = '/proc'


def main():
    module = AnsibleModule(
        argument_spec=dict(patterns=dict(type='list', elements='str', default=list(DEFAULT_PATTERNS)),
                           log_dirs=dict(type='list', elements='path', default=[]),
                           log_retention_days=dict(type='int', default=0)),
        supports_check_mode=True)
    patterns = module.params['patterns']
    result = dict(changed=False, removed=[], kept_in_use=[], pruned_logs=[])
    for pat in patterns:
        try:
            pattern_base(pat)
        except ValueError as e:
            module.fail_json(msg='refusing pattern: %s' % to_native(e), **result)
    days = module.params['log_retention_days']
    if days < 0:
        module.fail_json(msg='log_retention_days=%d is negative; give a number of days, or 0 to keep every log' % days,
                         **result)
    try:
        removable, kept = plan(patterns, PROC_ROOT)
    except ValueError as e:
        module.fail_json(msg='refusing pattern: %s' % to_native(e), **result)
    try:
        old, kept_logs = (old_logs(module.params['log_dirs'], days * 86400.0,
                                   time.time(), PROC_ROOT) if days > 0 else ([], []))
    except ValueError as e:
        module.fail_json(msg='refusing to prune: %s' % to_native(e), **result)
    kept = kept + kept_logs
    result['kept_in_use'] = kept
    for k in kept:
        module.warn('kept %s: %s is in use by pid %d (%s)' % (k['path'], k['in_use_path'], k['pid'], k['process']))
    if module._diff:
        before = sorted(removable + [k['path'] for k in kept])
        after = sorted(k['path'] for k in kept)
        result['diff'] = dict(before='\n'.join(before) + '\n' if before else '',
                              after='\n'.join(after) + '\n' if after else '')
    if module.check_mode:
        result['removed'] = removable
        result['pruned_logs'] = old
        result['changed'] = bool(removable or old)
        module.exit_json(**result)
    errors = []
    for path in removable:
        try:
            remove_entry(path)
        except (IOError, OSError) as e:
            if e.errno == errno.ENOENT:
                continue
            errors.append('%s: %s' % (path, to_native(e)))
            continue
        result['removed'].append(path)
    for path in old:
        try:
            remove_entry(path)
        except (IOError, OSError) as e:
            if e.errno != errno.ENOENT:
                errors.append('%s: %s' % (path, to_native(e)))
            continue
        result['pruned_logs'].append(path)
    result['changed'] = bool(result['removed'] or result['pruned_logs'])
    if errors:
        module.fail_json(msg='could not remove %d stale file(s): %s; remove them by hand (as root) before starting '
                             'vLLM' % (len(errors), '; '.join(errors)), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
