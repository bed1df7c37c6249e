# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prefill and decode roles import the engine role's internal serve entry point, the preflight calls its instances,
the proxy imports its guard, and serve.yml includes the other entry points, without a spec run (rolespec_validate: false,
include_tasks; issue 36: a task per call on every host): what they pass is checked here against those specs instead,
each option the spec requires passed and nothing it does not name (a name of the caller's own, __x, is no option)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def load(*path):
    with open(os.path.join(ROOT, *path), encoding='utf-8') as f:
        return yaml.safe_load(f)


SPECS = load('roles', 'engine', 'meta', 'argument_specs.yml')['argument_specs']


def unvalidated_calls(role):
    """(entry point, vars) of each include_role or import_role of the engine role without a spec run in ROLE's
    tasks/main.yml."""
    return [(entry, passed) for where, entry, passed in every_unvalidated_call() if where == 'roles/%s/tasks/main.yml' % role]


def tasks_of(tasks):
    """Every task of a list of tasks, those inside blocks too."""
    out = []
    for task in tasks:
        out.append(task)
        for part in ('block', 'rescue', 'always'):
            out.extend(tasks_of(task.get(part) or []))
    return out


def every_unvalidated_call():
    """(task file, entry point, vars) of each include_role or import_role of the engine role without a spec run, in any
    role."""
    out = []
    for role in sorted(os.listdir(os.path.join(ROOT, 'roles'))):
        tasks = os.path.join(ROOT, 'roles', role, 'tasks')
        for name in sorted(os.listdir(tasks)) if os.path.isdir(tasks) else []:
            for task in tasks_of(load(tasks, name) or []):
                # imports (no include task per host; issue 36) and includes alike
                inc = task.get('ansible.builtin.include_role') or task.get('ansible.builtin.import_role')
                if inc and inc['name'] == 'vllm_pd.ascend.engine' and inc.get('rolespec_validate') is False:
                    out.append(('roles/%s/tasks/%s' % (role, name), inc['tasks_from'], task.get('vars') or {}))
    return out


def serve_includes(name='serve.yml'):
    """(entry points, vars) of each include of another entry point in the engine's serve.yml, and in the task files
    it includes that are no entry point (no spec run)."""
    out = []
    for task in load('roles', 'engine', 'tasks', name):
        inc = task.get('ansible.builtin.include_tasks')
        if inc:
            # the templated name is plan.yml, install.yml or install_common.yml (install.yml's path for the common
            # instance, no entry point: test_install_common_is_a_path_of_install checks it)
            entries = re.findall(r"'(\w+)'", inc) if inc.startswith('{{') else [inc[:-len('.yml')]]
            if not any(e in SPECS for e in entries):
                out.extend(serve_includes(inc))
                continue
            out.append(([e for e in entries if e in SPECS], task.get('vars') or {}))
    return out


def check(where, entry, passed):
    options = SPECS[entry]['options']
    required = sorted(k for k, v in options.items() if v.get('required'))
    assert sorted(set(required) - set(passed)) == [], (where, entry)
    assert sorted(set(passed) - set(options)) == [], (where, entry)


@pytest.mark.parametrize('role', ['prefill', 'decode'])
def test_each_role_serves_its_own_kind_through_one_entry_point(role):
    assert unvalidated_calls(role) == [('serve', {'engine_kind': role})]
    check(role, 'serve', {'engine_kind': role})


def test_what_serve_passes_matches_the_entry_points_specs():
    calls = serve_includes()
    assert sorted(e for call in calls for e in call[0]) == ["address", "install", "instances"]
    for entries, passed in calls:
        for entry in entries:
            # serve's own options reach what it includes
            check('serve.yml', entry, dict(passed, **{k: None for k in SPECS['serve']['options']})
                  if 'engine_kind' in SPECS[entry]['options'] else passed)


def test_every_call_without_a_spec_run_passes_what_its_spec_says():
    calls = every_unvalidated_call()
    assert sorted((where, entry) for where, entry, dummy in calls) == [
        ('roles/decode/tasks/main.yml', 'serve'), ('roles/prefill/tasks/main.yml', 'serve'),
        ('roles/preflight/tasks/main.yml', 'instances'), ('roles/proxy/tasks/main.yml', 'guard')]
    for where, entry, passed in calls:
        check(where, entry, dict((k, v) for k, v in passed.items() if not k.startswith('__')))


def imports(name):
    """The task files NAME imports, and those they import, in order (the static part of its path)."""
    out = []
    for task in tasks_of(load('roles', 'engine', 'tasks', name)):
        inc = task.get('ansible.builtin.import_tasks')
        if inc:
            out.extend([inc] + imports(inc))
    return out


def test_install_common_is_a_path_of_install():
    """serve.yml installs the common instance (no files_inputs.yml, no rolling change) with install_common.yml
    instead of install.yml (issue 36: two skipped includes less): the same files and start, what the install entry
    point's spec says it gets (serve.yml passes both the same vars)."""
    templated = [t['ansible.builtin.include_tasks'] for t in load('roles', 'engine', 'tasks', 'serve.yml')
                 if str(t.get('ansible.builtin.include_tasks', '')).startswith('{{')]
    names = re.findall(r"'(\w+)'", templated[0])
    assert names == ['plan', 'install', 'install_common']
    assert 'install_common' not in SPECS
    common = imports('install_common.yml')
    assert common == ['unit_files.yml', 'guard.yml', 'start.yml']
    assert all(name in imports('install.yml') for name in common)
    start = [t for t in load('roles', 'engine', 'tasks', 'install.yml') if t.get('ansible.builtin.import_tasks') == 'start.yml']
    assert [t['vars'] for t in load('roles', 'engine', 'tasks', 'install_common.yml')
            if t.get('ansible.builtin.import_tasks') == 'start.yml'] == [t['vars'] for t in start]
