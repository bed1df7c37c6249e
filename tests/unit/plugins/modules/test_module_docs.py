# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes of every module come from plugins/doc_fragments/attributes.py; a module writes only what
is its own (support and details that differ), so the shared text is in one place."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import os

import pytest
import yaml

from ansible_collections.vllm_pd.ascend.plugins.doc_fragments.attributes import ModuleDocFragment

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *['..'] * 4))
MODULES = os.path.join(REPO_ROOT, 'plugins', 'modules')
BASE, READ_ONLY = 'vllm_pd.ascend.attributes', 'vllm_pd.ascend.attributes.read_only'
FRAGMENTS = {BASE: ModuleDocFragment.DOCUMENTATION, READ_ONLY: ModuleDocFragment.READ_ONLY}


def documentation(name):
    with open(os.path.join(MODULES, name), encoding='utf-8') as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ['DOCUMENTATION']:
            return yaml.safe_load(node.value.value)
    raise AssertionError('%s has no DOCUMENTATION' % name)


@pytest.mark.parametrize('name', sorted(n for n in os.listdir(MODULES) if n.endswith('.py') and not n.startswith('_')))
def test_attributes_come_from_the_fragment(name):
    doc = documentation(name)
    extends = doc.get('extends_documentation_fragment', [])
    assert BASE in extends, '%s: extend %s for the attributes' % (name, BASE)
    given = {}
    for fragment in extends:
        for attr, fields in (yaml.safe_load(FRAGMENTS[fragment]).get('attributes', {}) if fragment in FRAGMENTS else {}).items():
            given.setdefault(attr, {}).update(fields)
    own = doc.get('attributes', {})
    for attr, fields in own.items():
        for key, value in fields.items():
            assert given.get(attr, {}).get(key) != value, (
                '%s: attributes.%s.%s repeats the fragment; remove it' % (name, attr, key))
    merged = dict((a, dict(given.get(a, {}), **own.get(a, {}))) for a in set(given) | set(own))
    if (merged['check_mode'].get('support'), merged['diff_mode'].get('support')) == ('full', 'none'):
        assert READ_ONLY in extends, '%s only reads: extend %s instead of writing its attributes' % (name, READ_ONLY)
