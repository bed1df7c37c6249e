# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make the repository importable as ansible_collections.vllm_pd.ascend for the unit tests.

Once per session: <tmp>/ansible_collections/vllm_pd/ascend -> repo root, <tmp> on sys.path.
If the repo already sits in an ansible_collections tree (ansible-test units), that one is used.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import atexit
import os
import shutil
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _install_collection_path():
    parts = REPO_ROOT.split(os.sep)
    if len(parts) >= 3 and parts[-3] == 'ansible_collections' and parts[-2:] == ['vllm_pd', 'ascend']:
        root = os.sep.join(parts[:-3])
    else:
        root = tempfile.mkdtemp(prefix='vllm_pd_units_')
        ns_dir = os.path.join(root, 'ansible_collections', 'vllm_pd')
        os.makedirs(ns_dir)
        os.symlink(REPO_ROOT, os.path.join(ns_dir, 'ascend'))
        atexit.register(shutil.rmtree, root, True)
    if root not in sys.path:
        sys.path.insert(0, root)
    # a stale non-namespace 'ansible_collections' import would shadow ours
    mod = sys.modules.get('ansible_collections')
    if mod is not None and root + os.sep + 'ansible_collections' not in list(getattr(mod, '__path__', [])):
        for name in [n for n in sys.modules if n == 'ansible_collections' or n.startswith('ansible_collections.')]:
            del sys.modules[name]
    return root


COLLECTIONS_ROOT = _install_collection_path()
