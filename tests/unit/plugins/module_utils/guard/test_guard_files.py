# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the start guard needs on a host, from its imports (test_start_guard runs the real tree)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.guard import guard_files as GF

P = GF.PREFIX
TREE = {
    'a/__init__.py': '',
    'a/entry.py': 'import os\nfrom %s.a import helper\nfrom %s.b.lazy_user import f\n' % (P, P),
    'a/helper.py': 'import %s.b.plain\n' % P,
    'b/__init__.py': '',
    'b/plain.py': 'X = 1\n',
    'b/lazy_user.py': 'def f():\n    from %s.c.late import g\n    return g()\n' % P,
    'c/__init__.py': '',
    'c/late.py': 'from ansible.module_utils.basic import AnsibleModule\n',
    'c/unused.py': '',
}


def test_every_kind_of_import_is_followed_and_packages_come_along():
    assert GF.closure(['a.entry'], TREE.get) == [
        'a/__init__.py', 'a/entry.py', 'a/helper.py', 'b/__init__.py', 'b/lazy_user.py', 'b/plain.py',
        'c/__init__.py', 'c/late.py']


def test_a_name_from_a_module_is_no_module():
    assert GF.imported_modules('from %s.b.plain import X\nfrom %s.b import plain\n' % (P, P), TREE.get) == {'b.plain'}


def test_an_import_without_a_file_is_named():
    tree = dict(TREE, **{'c/late.py': 'from %s.c.gone import g\n' % P})
    with pytest.raises(ValueError, match=r'c/late.py imports .*module_utils\.c\.gone, which is not in plugins/module_utils'):
        GF.closure(['a.entry'], tree.get)


def test_a_relative_import_is_refused():
    with pytest.raises(ValueError, match=r'x.py:2: relative import'):
        GF.imported_modules('import os\nfrom . import plain\n', TREE.get, 'x.py')
