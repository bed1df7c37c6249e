# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller CPU seconds per task, for tests/perf/bench_rollout.py.

The CPU of ansible-playbook's main process plus the workers it has reaped (os.times()), charged to
the task that was running; with the linear strategy tasks run one after another, so each delta is
that task's cost over all its hosts. Written as JSON to $BENCH_CPU_OUT at the end of the playbook.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: cpu_per_task
type: aggregate
short_description: controller CPU seconds per task (benchmark only)
description:
  - Writes [{task, role, runs, cpu, wall}] to the file named by BENCH_CPU_OUT.
requirements:
  - enabled in callbacks_enabled, BENCH_CPU_OUT set
"""


def _cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cpu_per_task"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self._tasks = {}
        self._current = None
        self._mark = (_cpu(), time.monotonic())

    def _switch(self, key):
        cpu, now = _cpu(), time.monotonic()
        if self._current is not None:
            entry = self._tasks[self._current]
            entry["cpu"] += cpu - self._mark[0]
            entry["wall"] += now - self._mark[1]
        self._current, self._mark = key, (cpu, now)

    def _start(self, task):
        role = task._role.get_name() if task._role else ""
        key = (role, task.get_name())
        self._tasks.setdefault(key, {"task": key[1], "role": role, "runs": 0, "cpu": 0.0, "wall": 0.0})
        self._switch(key)

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start(task)

    def _ran(self, result):
        key = (result._task._role.get_name() if result._task._role else "", result._task.get_name())
        if key in self._tasks:
            self._tasks[key]["runs"] += 1

    def v2_runner_on_ok(self, result):
        self._ran(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._ran(result)

    def v2_runner_on_skipped(self, result):
        self._ran(result)

    def v2_runner_on_unreachable(self, result):
        self._ran(result)

    def v2_playbook_on_stats(self, stats):
        self._switch(None)
        out = os.environ.get("BENCH_CPU_OUT")
        if out:
            with open(out, "w", encoding="utf-8") as f:
                json.dump(list(self._tasks.values()), f)
