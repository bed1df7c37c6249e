# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files the "one of each" guards read (test_one_port_formula, test_one_parser, test_one_membership)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os


def sources(root, bases=('plugins', 'roles'), suffixes=('.py', '.yml', '.yaml', '.j2')):
    """(path relative to ROOT, text) of every file under ROOT/BASES whose name ends with one of SUFFIXES."""
    for base in bases:
        for dirpath, dirs, files in os.walk(os.path.join(root, base)):
            dirs[:] = [d for d in dirs if d != '__pycache__']
            for name in sorted(files):
                if name.endswith(suffixes):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding='utf-8') as f:
                        yield os.path.relpath(path, root).replace(os.sep, '/'), f.read()
