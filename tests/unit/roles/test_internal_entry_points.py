# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prefill and decode roles call the engine role's internal entry points without a spec run (rolespec_validate:
false, issue 36: a task per instance on every host): what they pass is checked here against those specs instead,
each option the spec requires passed and nothing it does not name."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def load(*path):
    with open(os.path.join(ROOT, *path), encoding='utf-8') as f:
        return yaml.safe_load(f)


SPECS = load('roles', 'engine', 'meta', 'argument_specs.yml')['argument_specs']


def unvalidated_calls(role):
    """(entry points, vars) of each include_role of the engine role without a spec run in ROLE's tasks."""
    out = []
    for task in load('roles', role, 'tasks', 'main.yml'):
        inc = task.get('ansible.builtin.include_role')
        if inc and inc['name'] == 'vllm_pd.ascend.engine' and inc.get('rolespec_validate') is False:
            entries = ['plan', 'install'] if 'plan' in inc['tasks_from'] else [inc['tasks_from']]
            out.append(([e for e in entries if e in SPECS], task.get('vars') or {}))
    return out


@pytest.mark.parametrize('role', ['prefill', 'decode'])
def test_what_the_roles_pass_matches_the_entry_points_specs(role):
    calls = unvalidated_calls(role)
    assert sorted(e for call in calls for e in call[0]) == ["install", "wait_ready"]
    for entries, passed in calls:
        for entry in entries:
            options = SPECS[entry]['options']
            required = sorted(k for k, v in options.items() if v.get('required'))
            assert sorted(set(required) - set(passed)) == [], (role, entry)
            assert sorted(set(passed) - set(options)) == [], (role, entry)
