# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the start guard needs on a host, from its imports (test_start_guard runs the real tree)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import subprocess
import sys
import zipfile

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


def test_guard_tree_is_the_closure_below_its_package_path_with_every_package_level():
    dirs, files = GF.guard_tree('/g', TREE_WITH_GUARD.get)
    lib = '/g/' + P.replace('.', '/')
    assert dirs == ['/g', '/g/ansible_collections', '/g/ansible_collections/vllm_pd', '/g/ansible_collections/vllm_pd/ascend',
                    '/g/ansible_collections/vllm_pd/ascend/plugins', lib, lib + '/a', lib + '/b', lib + '/guard']
    assert [f['path'] for f in files if f['content'] == ''][:5] == [d + '/__init__.py' for d in dirs[1:6]]
    wanted = ['a/__init__.py', 'a/helper.py', 'b/__init__.py', 'b/plain.py', 'guard/__init__.py', 'guard/start_guard.py']
    assert dict((f['path'][len(lib) + 1:], f['content']) for f in files[5:]) == dict((p, TREE_WITH_GUARD[p]) for p in wanted)
    assert files[5:] and all(f['path'].startswith(lib + '/') for f in files[5:])


TREE_WITH_GUARD = dict(TREE, **{'guard/__init__.py': '', 'guard/start_guard.py': 'from %s.a import helper\n' % P})

# In a module's AnsiballZ payload the collection's files are in a zip on sys.path, not on disk: the guard's tree
# must read the same from there (file_set's start_guard_root writes it on a host from that payload).
_FROM_ZIP = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.vllm_pd.ascend.plugins.module_utils.guard import guard_files as GF
assert '.zip' in GF.__file__, GF.__file__
try:
    print(json.dumps(GF.guard_tree('/r')))
except ValueError as e:
    print(json.dumps(str(e)))
'''


def payload_zip(path, leave_out=None):
    """A zip of the collection's module_utils under their package path, as a module's payload holds them."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(GF.__file__)))
    with zipfile.ZipFile(str(path), 'w') as z:
        for level in range(1, 6):
            z.writestr('/'.join(P.split('.')[:level]) + '/__init__.py', '')
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, '/')
                if name.endswith('.py') and rel != leave_out:
                    z.write(os.path.join(dirpath, name), P.replace('.', '/') + '/' + rel)
    return str(path)


def from_zip(archive):
    r = subprocess.run([sys.executable, '-I', '-c', _FROM_ZIP, archive], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def test_the_guard_tree_read_from_a_module_payload_is_the_checkout_one(tmp_path):
    dirs, files = from_zip(payload_zip(tmp_path / 'payload.zip'))
    assert [dirs, files] == json.loads(json.dumps(GF.guard_tree('/r'))) and len(files) > 10


def test_a_payload_without_a_file_the_guard_imports_is_named(tmp_path):
    assert 'imports %s.ports.port_free, which is not' % P in from_zip(payload_zip(tmp_path / 'p.zip', 'ports/port_free.py'))
