# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils is one package per pipeline stage (docs/design.md "module_utils by stage"), and a
stage imports only itself and earlier stages: read from the source (guard_files.imported_modules, the
reader that finds the start guard's files), lazy imports inside functions included."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.guard.guard_files import imported_modules

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *['..'] * 4))
BASE = os.path.join(REPO_ROOT, 'plugins', 'module_utils')
# the order of the flow; common is what every stage shares
STAGES = ('common', 'inventory', 'model', 'ports', 'host', 'npu', 'guard', 'verify', 'doctor')


def sources():
    for dirpath, dirs, files in os.walk(BASE):
        dirs[:] = [d for d in dirs if d != '__pycache__']
        for name in files:
            if name.endswith('.py'):
                yield os.path.relpath(os.path.join(dirpath, name), BASE)


def test_every_file_sits_in_a_stage_package():
    for rel in sources():
        parts = rel.split(os.sep)
        assert len(parts) == 2 and parts[0] in STAGES, (
            '%s: module_utils files live in one of the stage packages %s (docs/design.md "module_utils by stage")' % (rel, STAGES))
    for stage in STAGES:
        init = os.path.join(BASE, stage, '__init__.py')
        assert os.path.isfile(init) and os.path.getsize(init) == 0, init


def read(rel):
    path = os.path.join(BASE, rel)
    if not os.path.isfile(path):
        return None
    with open(path, encoding='utf-8') as f:
        return f.read()


@pytest.mark.parametrize('rel', sorted(sources()))
def test_a_stage_imports_only_itself_and_earlier_stages(rel):
    own = rel.split(os.sep)[0]
    for name in sorted(imported_modules(read(rel), read, rel)):
        stage = name.split('.')[0]
        assert stage in STAGES, '%s imports %s, which is in no stage package' % (rel, name)
        assert STAGES.index(stage) <= STAGES.index(own), (
            '%s: stage %s imports %s of the later stage %s (order: %s)' % (rel, own, name, stage, ' -> '.join(STAGES)))
