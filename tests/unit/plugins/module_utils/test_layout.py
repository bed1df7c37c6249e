# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils is one package per pipeline stage (docs/design.md "Layout"), and a stage imports
only itself and earlier stages: read from the source, lazy imports inside functions included."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import os

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *['..'] * 4))
BASE = os.path.join(REPO_ROOT, 'plugins', 'module_utils')
PREFIX = 'ansible_collections.vllm_pd.ascend.plugins.module_utils'
# the order of the flow; common is what every stage shares
STAGES = ('common', 'inventory', 'model', 'ports', 'host', 'npu', 'guard', 'verify', 'doctor')


def imported_stages(source):
    """(line, stage) of every import of a collection module_utils package in the source."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, 'line %d: a relative import (use the full ansible_collections path)' % node.lineno
            names = [node.module or ''] + ['%s.%s' % (node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        stages = set(name[len(PREFIX) + 1:].split('.')[0] for name in names if name.startswith(PREFIX + '.'))
        for stage in sorted(stages):
            yield node.lineno, stage


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
            '%s: module_utils files live in one of the stage packages %s (docs/design.md "Layout")' % (rel, STAGES))
    for stage in STAGES:
        init = os.path.join(BASE, stage, '__init__.py')
        assert os.path.isfile(init) and os.path.getsize(init) == 0, init


@pytest.mark.parametrize('rel', sorted(sources()))
def test_a_stage_imports_only_itself_and_earlier_stages(rel):
    own = rel.split(os.sep)[0]
    with open(os.path.join(BASE, rel)) as f:
        found = list(imported_stages(f.read()))
    for line, stage in found:
        assert stage in STAGES, '%s:%d imports %s, which is no stage package' % (rel, line, stage)
        assert STAGES.index(stage) <= STAGES.index(own), (
            '%s:%d: stage %s imports the later stage %s (order: %s)' % (rel, line, own, stage, ' -> '.join(STAGES)))


def test_the_reader_sees_every_kind_of_import():
    src = ('from %s.ports import owners\n'
           'import %s.verify.zmtp\n'
           'def f():\n'
           '    from %s.doctor.doctor_logs import scan\n') % (PREFIX, PREFIX, PREFIX)
    assert [s for _, s in imported_stages(src)] == ['ports', 'verify', 'doctor']
