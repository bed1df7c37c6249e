# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A task that can fail a host must not decide by ansible_play_hosts: the hosts failed by that same task leave it as
their results come in, while the strategy is still templating the task for the others, so what a host sees depends on
the controller's load. The clean-clone CI of 4e10ae8 named only one of two inventory names of one machine that way
(the twin check read ansible_play_hosts; the twin failed first and was gone). ansible_play_hosts_all, or a host list
fixed by an earlier task that fails no host, decides the same on every run."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

FAILING_MODULES = ('ansible.builtin.assert', 'ansible.builtin.fail', 'vllm_pd.ascend.pd_verdict')
PLAY_HOSTS = re.compile(r'\bansible_play_hosts\b(?!_all)')

# Tasks that read ansible_play_hosts on purpose, with why the race cannot change what they decide.
ALLOWED = {
    # A host fails its cluster's gate only when another host of that cluster failed in an earlier task (already out of
    # ansible_play_hosts): a host that leaves during the gate fails the same cluster's hosts that would fail anyway.
    ('roles/rollout/tasks/gate.yml', 'Stop this cluster when one of its hosts has failed, before {{ __rollout_step }}'),
    # It counts the failed hosts of the batch before; the hosts this task fails are of the current batch.
    ('roles/rollout/tasks/batch.yml', 'Stop this host when an earlier batch failed and the policy says stop'),
}


def tasks_of(tasks):
    out = []
    for task in tasks or []:
        out.append(task)
        for part in ('block', 'rescue', 'always'):
            out.extend(tasks_of(task.get(part)))
    return out


def role_vars(root, role):
    """The role's vars/main.yml: a task reads them by name, so their text counts as the task's."""
    path = os.path.join(root, 'roles', role, 'vars', 'main.yml')
    if not os.path.exists(path):
        return {}
    with open(path, encoding='utf-8') as f:
        return yaml.safe_load(f) or {}


def racing_tasks(root=ROOT):
    found = []
    for path in sorted(glob.glob(os.path.join(root, 'roles', '*', 'tasks', '*.yml'))):
        rel = os.path.relpath(path, root)
        variables = role_vars(root, rel.split(os.sep)[1])
        with open(path, encoding='utf-8') as f:
            tasks = yaml.safe_load(f) or []
        for task in tasks_of(tasks):
            can_fail = any(m in task for m in FAILING_MODULES) or 'failed_when' in task
            if not can_fail:
                continue
            text = yaml.safe_dump(task)
            text += ''.join(yaml.safe_dump(value) for name, value in variables.items() if re.search(r'\b%s\b' % name, text))
            if PLAY_HOSTS.search(text) and (rel, task.get('name')) not in ALLOWED:
                found.append((rel, task.get('name')))
    return found


def test_no_task_that_fails_hosts_decides_by_the_hosts_still_in_play():
    assert racing_tasks() == []


def test_the_check_sees_a_task_that_reads_the_hosts_still_in_play(tmp_path):
    tasks = tmp_path / 'roles' / 'x' / 'tasks'
    tasks.mkdir(parents=True)
    (tmp_path / 'roles' / 'x' / 'vars').mkdir()
    (tmp_path / 'roles' / 'x' / 'vars' / 'main.yml').write_text("__x_peers: \"{{ ansible_play_hosts }}\"\n")
    (tasks / 'main.yml').write_text(
        "- name: direct\n  ansible.builtin.assert:\n    that: ansible_play_hosts | length > 1\n"
        "- name: through a role var\n  ansible.builtin.fail:\n    msg: x\n  when: __x_peers | length > 1\n"
        "- name: every host, fine\n  ansible.builtin.assert:\n    that: ansible_play_hosts_all | length > 1\n"
        "- name: fails no host, fine\n  ansible.builtin.set_fact:\n    y: \"{{ ansible_play_hosts }}\"\n")
    assert racing_tasks(str(tmp_path)) == [('roles/x/tasks/main.yml', 'direct'), ('roles/x/tasks/main.yml', 'through a role var')]
