# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module_utils files a piece of code needs on a host, read from its import statements.

The engine role copies the start guard to every host with what it imports (guard_tree, through file_set's
start_guard_root): the imports themselves are the list, so a new import cannot be forgotten on the hosts.
Imports inside functions count too. Pure functions over a reader of the module_utils tree (relative path ->
text, None when absent); read_source reads the controller's files, or a module's payload on a host.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import os
import zipfile

PREFIX = 'ansible_collections.vllm_pd.ascend.plugins.module_utils'
MODULE_UTILS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_source(path):
    """The text of PATH under this collection's module_utils (as 'common/releases.py'), None when there is none:
    the READ of closure(). On the controller the files are on disk; inside a module's AnsiballZ payload (a zip
    on the module's sys.path) they are read from that zip, so a module carries the files it imports to a host."""
    full = os.path.join(MODULE_UTILS, path)
    try:
        with open(full, 'rb') as f:
            return f.read().decode('utf-8')
    except (IOError, OSError):
        return _zip_member(full)


def _zip_member(full):
    """Text of FULL when a leading part of it is a zip archive (ARCHIVE/member/path), else None."""
    archive = os.path.dirname(full)
    while archive and not os.path.isfile(archive):
        parent = os.path.dirname(archive)
        if parent == archive:
            return None
        archive = parent
    if not archive or not zipfile.is_zipfile(archive):
        return None
    try:
        with zipfile.ZipFile(archive) as z:
            return z.read(os.path.relpath(full, archive).replace(os.sep, '/')).decode('utf-8')
    except KeyError:
        return None


def guard_tree(root, read=read_source):
    """The start guard's package tree below ROOT, as the engine role writes it on a host -> (directories, files).

    Directories parents first: ROOT, each package level from ROOT/ansible_collections down to module_utils, then
    the stage packages. Files: an empty __init__.py at each of those levels (so no other ansible_collections
    on the host shadows them), then start_guard.py and every module_utils file it imports
    (closure), byte for byte, with their packages' __init__.py. ValueError names an import that has no file."""
    parts = PREFIX.split('.')
    levels = [os.path.join(root, *parts[:depth]) for depth in range(1, len(parts) + 1)]
    lib = levels[-1]
    tree = closure(['guard.start_guard'], read)
    stages = sorted(set(os.path.join(lib, os.path.dirname(p)) for p in tree) - set([lib]))
    files = [dict(path=os.path.join(level, '__init__.py'), content='') for level in levels]
    files.extend(dict(path=os.path.join(lib, p), content=read(p)) for p in tree)
    return [root] + levels + stages, files


def module_path(name, read):
    """'ports.port_free' -> 'ports/port_free.py' (or 'pkg/__init__.py' for a package); None when neither exists."""
    base = name.replace('.', '/')
    for path in (base + '.py', base + '/__init__.py'):
        if read(path) is not None:
            return path
    return None


def imported_modules(source, read, where='<source>'):
    """Dotted names below module_utils ('ports.port_free') of the collection's modules the source imports.

    ``from PREFIX.ports import owners`` imports the module ports.owners; ``from PREFIX.ports.owners import f``
    the module ports.owners. A relative import raises ValueError (Ansible resolves only absolute ones).
    """
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                raise ValueError('%s:%d: relative import; write the full %s path' % (where, node.lineno, PREFIX))
            names = []
            for alias in node.names:
                full = '%s.%s' % (node.module, alias.name)
                inner = full[len(PREFIX) + 1:] if full.startswith(PREFIX + '.') else None
                names.append(full if inner and module_path(inner, read) else node.module)
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(n[len(PREFIX) + 1:] for n in names if n.startswith(PREFIX + '.'))
    return found


def closure(entries, read):
    """Sorted relative paths of the entry modules, every module they import (transitively) and the
    __init__.py of each package on the way; ValueError names an import that has no file."""
    todo = [(name, '<entry>') for name in entries]
    paths = set()
    while todo:
        name, importer = todo.pop()
        path = module_path(name, read)
        if path is None:
            raise ValueError('%s imports %s.%s, which is not in plugins/module_utils' % (importer, PREFIX, name))
        if path in paths:
            continue
        paths.add(path)
        parts = path.split('/')[:-1]
        for depth in range(1, len(parts) + 1):
            init = '/'.join(parts[:depth]) + '/__init__.py'
            if read(init) is not None:
                paths.add(init)
        todo.extend((n, path) for n in imported_modules(read(path), read, path))
    return sorted(paths)
