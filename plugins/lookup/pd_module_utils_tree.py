# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_module_utils_tree
short_description: The collection's module_utils files that given modules need, found from their imports
version_added: "1.1.0"
description:
  - Reads the import statements of each named module of C(plugins/module_utils) (those inside functions too) and
    of every collection module they import in turn, and returns those files with the C(__init__.py) of their
    packages.
  - The same import reading (C(guard_files.closure)) decides which files the engine role copies with the start guard
    to the hosts (module C(file_set), option C(start_guard_root)), so the guard's own imports say what it needs on a
    host; there is no list to keep.
options:
  _terms:
    description: Dotted names below C(plugins/module_utils), for example V(guard.start_guard).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Show the files the start guard needs on a host
  ansible.builtin.debug:
    msg: "{{ query('vllm_pd.ascend.pd_module_utils_tree', 'guard.start_guard') | map(attribute='path') }}"
"""

RETURN = r"""
_raw:
  description: One dict a file, sorted by path.
  type: list
  elements: dict
  contains:
    path:
      description: Path below C(plugins/module_utils), for example V(ports/port_free.py).
      type: str
    content:
      description: The file's text, unchanged.
      type: str
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.vllm_pd.ascend.plugins.module_utils.guard.guard_files import closure, read_source as read


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        try:
            paths = closure(terms, read)
        except (ValueError, SyntaxError) as exc:
            raise AnsibleLookupError('pd_module_utils_tree: %s' % exc)
        return [dict(path=p, content=read(p)) for p in paths]
