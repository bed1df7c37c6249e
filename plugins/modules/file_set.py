#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: file_set
short_description: Write several small files and their directories in one call
version_added: "1.0.0"
description:
  - Makes a set of directories and small text files as given (content, mode, owner) in one module run, writing
    only what differs; each file is replaced atomically (a temporary file in the same directory, then a rename).
  - The engine role installs the start guard with it (the runner, the collection's module_utils it runs and the
    unit's configuration) together with the unit's systemd unit and environment file, which took one copy or
    template task per file before.
  - A path that is a symlink, or a directory where a file is wanted (or the other way round), is refused;
    nothing is followed. Missing parents of a listed directory are created with its mode and owner.
options:
  directories:
    description: Absolute paths of the directories to create (mode O(directory_mode)).
    type: list
    elements: path
    default: []
  files:
    description: The files to write.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path; its directory must exist or be listed in O(directories).
        type: path
        required: true
      content:
        description:
          - The whole content of the file (UTF-8 text).
          - Never shown (the option is C(no_log)), in the result, the invocation or a diff, so a file with secrets
            (an environment file with tokens) can be written in the same call.
        type: str
        required: true
      mode:
        description: Octal mode of this file; O(file_mode) when not given.
        type: raw
  start_guard_root:
    description:
      - Also write the start guard's code below this directory (created with its package directories), that is the
        collection's C(guard/start_guard.py) and every module_utils file it imports, byte for byte, in their
        package path C(ansible_collections/vllm_pd/ascend/plugins/module_utils/), with an empty C(__init__.py) at
        each package level.
      - The files come from this module's own payload (which carries what the module imports), so nothing of
        them is sent from the controller as an argument.
    type: path
  owner:
    description: Owner of every entry.
    type: str
    default: root
  group:
    description: Group of every entry.
    type: str
    default: root
  directory_mode:
    description: Octal mode of the directories.
    type: raw
    default: "0755"
  file_mode:
    description: Octal mode of the files that give none.
    type: raw
    default: "0644"
attributes:
  check_mode:
    support: full
    details: RV(changed_paths) lists what would be written; nothing is.
  diff_mode:
    support: partial
    details: Lists each path that differs and what differs (content, mode, owner), not the contents.
seealso:
  - module: ansible.builtin.copy
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Install two files and their directory in one call
  vllm_pd.ascend.file_set:
    directories: [/etc/example]
    files:
      - path: /etc/example/a.json
        content: "{{ {'a': 1} | to_nice_json }}\n"
      - path: /etc/example/run
        content: "{{ lookup('ansible.builtin.file', 'run', rstrip=false) }}"
        mode: "0755"
"""

RETURN = r"""
changed_paths:
  description: The paths written or corrected (in check mode, that would be), parents first.
  returned: always
  type: list
  elements: str
  sample: [/etc/vllm-pd, /etc/vllm-pd/prefill.guard.json]
differences:
  description: For each path of RV(changed_paths), what differed (absent, content, mode, owner).
  returned: always
  type: dict
  sample: {/etc/vllm-pd/prefill.guard.json: [content]}
"""

import grp
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

# start_guard is imported only so that this module's payload carries the guard's code (start_guard_root)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.guard import start_guard  # noqa: F401 pylint: disable=unused-import
from ansible_collections.vllm_pd.ascend.plugins.module_utils.guard.guard_files import guard_tree
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.file_set import (
    apply, parse_mode, plan, present, wanted,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type='list', elements='path', default=[]),
            files=dict(type='list', elements='dict', default=[], options=dict(
                path=dict(type='path', required=True),
                content=dict(type='str', required=True, no_log=True),
                mode=dict(type='raw'))),
            start_guard_root=dict(type='path'),
            owner=dict(type='str', default='root'),
            group=dict(type='str', default='root'),
            directory_mode=dict(type='raw', default='0755'),
            file_mode=dict(type='raw', default='0644')),
        supports_check_mode=True)
    p = module.params
    result = dict(changed=False, changed_paths=[], differences={})
    directories, files = p['directories'], p['files']
    if p['start_guard_root']:
        try:
            tree_dirs, tree_files = guard_tree(p['start_guard_root'])
        except (ValueError, SyntaxError) as e:
            module.fail_json(msg='start_guard_root: the start guard\'s code is incomplete in this module (%s); install '
                                 'the collection again (ansible-galaxy collection install --force)' % to_native(e), **result)
        directories, files = tree_dirs + directories, tree_files + files
    try:
        entries = wanted(directories, files, parse_mode(p['directory_mode'], 'directory_mode'),
                         parse_mode(p['file_mode'], 'file_mode'))
    except ValueError as e:
        module.fail_json(msg=to_native(e), **result)
    try:
        uid = pwd.getpwnam(p['owner']).pw_uid
    except KeyError:
        module.fail_json(msg='owner: no user %s on this host; set owner to an existing user' % p['owner'], **result)
    try:
        gid = grp.getgrnam(p['group']).gr_gid
    except KeyError:
        module.fail_json(msg='group: no group %s on this host; set group to an existing group' % p['group'], **result)
    try:
        todo = plan(entries, present, uid, gid)
    except ValueError as e:
        module.fail_json(msg=to_native(e), **result)
    except (IOError, OSError) as e:
        module.fail_json(msg='cannot read %s: %s' % (getattr(e, 'filename', '?'), to_native(e)), **result)
    result['changed_paths'] = [e['path'] for e, dummy in todo]
    result['differences'] = dict((e['path'], d) for e, d in todo)
    result['changed'] = bool(todo)
    if module._diff:
        result['diff'] = dict(before=''.join('%s: %s\n' % (e['path'], ', '.join(d)) for e, d in todo), after='')
    if module.check_mode:
        module.exit_json(**result)
    for e, d in todo:
        try:
            apply(e, d, uid, gid)
        except (IOError, OSError) as err:
            module.fail_json(msg='cannot write %s: %s; its directory must exist (or be listed in directories) and be '
                                 'writable (run with become)' % (e['path'], to_native(err)), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
