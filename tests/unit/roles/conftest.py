# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scripts the roles run on hosts (roles/*/files/*.py, passed to python3 -c) loaded as modules."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.util
import os

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..')


def load_script(path):
    """PATH relative to the repository -> the script as a module (its main() not run)."""
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
