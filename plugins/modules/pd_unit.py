#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: pd_unit
short_description: Start a vllm_pd unit, or wait until its API is ready, naming why it did not
version_added: "1.2.0"
description:
  - With O(start), starts and enables a systemd unit, or restarts it with O(restart). Before a start it clears the
    unit's failed state and start counter (C(systemctl reset-failed)), so a few stop/fix/deploy cycles never end in
    C(start-limit-hit).
  - When the start fails (the start guard refused, the engine exited), fails with the start guard's refusal from the
    unit's journal, else the unit's last log lines.
  - With O(ready), polls O(ready.url) (C(/health)) every 0.25 s until it answers 200, then requires O(ready.models_url)
    (C(/v1/models)) to list a model; stops at once when the unit is no longer running, and fails with its last log
    lines (exited, lists no model, or not ready within O(ready.timeout)).
  - One module run for what took a command, a C(systemd_service) and a log read before (issue 36); the engine role
    starts every instance of a host first and then waits for each, so their models load together.
options:
  name:
    description: The systemd unit, for example V(vllm-pd-prefill.service).
    type: str
    required: true
  host:
    description: How messages name this host (the inventory name).
    type: str
    default: this host
  start:
    description: Start the unit (and enable it); V(false) only waits for O(ready).
    type: bool
    default: true
  restart:
    description: Restart the unit when it runs (its configuration changed); with O(start) only.
    type: bool
    default: false
  daemon_reload:
    description: Let systemd read changed unit files first; with O(start) only.
    type: bool
    default: false
  ready:
    description: Wait until the unit's API is ready; nothing is waited for when not given.
    type: dict
    suboptions:
      url:
        description: Polled until it answers 200 (the engine's C(/health)).
        type: str
        required: true
      models_url:
        description: Then must answer 200 listing a model (C(/v1/models)).
        type: str
      env_file:
        description:
          - The engine's environment file, whose C(VLLM_API_KEY) is sent to O(ready.models_url) (vLLM answers 401 under
            C(/v1) without it). The key is read on the host, never passed as an argument.
        type: path
      counts:
        description:
          - Values the JSON object O(ready.url) answers must hold before the unit counts as ready, polled until
            then (a process of the proxy tier - the number of prefill and decode members its health route counts,
            under the release table's keys).
        type: dict
      timeout:
        description: Seconds to wait in all.
        type: int
        default: 600
  replaces:
    description:
      - A unit that holds the port this unit takes over (the single proxy, which the proxy tier's HAProxy replaces).
        When it runs or is enabled, it is stopped and disabled just before this unit starts, while the port is tried
        every 10 ms from before that stop; RV(port_refused_s) says how long the port refused connections.
      - Nothing is done when it neither runs nor is enabled. When this unit already runs, it is only stopped.
    type: dict
    suboptions:
      unit:
        description: The unit replaced.
        type: str
        required: true
      address:
        description: The address clients connect to.
        type: str
        required: true
      port:
        description: The port both units serve.
        type: int
        required: true
      timeout:
        description: Seconds to wait, after the start, for the port to accept connections again.
        type: int
        default: 30
attributes:
  check_mode:
    support: full
    details: RV(actions) lists what would be done; nothing is started and nothing is waited for.
  diff_mode:
    support: partial
    details: Lists the systemctl steps taken (or, in check mode, that would be), not the unit's files.
seealso:
  - module: ansible.builtin.systemd_service
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Start HAProxy in place of the single proxy on port 8000, saying how long the port refused connections
  vllm_pd.ascend.pd_unit:
    name: vllm-pd-front.service
    host: "{{ inventory_hostname }}"
    replaces:
      unit: vllm-pd-proxy.service
      address: 10.0.0.1
      port: 8000
  register: __front_start

- name: Start the engine, restarting it when its configuration changed
  vllm_pd.ascend.pd_unit:
    name: vllm-pd-decode.service
    host: "{{ inventory_hostname }}"
    restart: "{{ __changed }}"

- name: Wait for the engine to answer /health and list its model
  vllm_pd.ascend.pd_unit:
    name: vllm-pd-decode.service
    host: "{{ inventory_hostname }}"
    start: false
    ready:
      url: http://10.0.0.2:8200/health
      models_url: http://10.0.0.2:8200/v1/models
      env_file: /etc/vllm-pd/decode.env
      timeout: 900
"""

RETURN = r"""
actions:
  description: What was done (in check mode, would be), in order.
  returned: always
  type: list
  elements: str
  sample: [daemon-reload, restart]
answer:
  description: The last answer of the API, V(ready), V(dead), or what kept it from ready (C(unlisted), C(members), C(starting), C(http-CODE) and why).
  returned: when O(ready) is given, outside check mode
  type: str
  sample: ready
waited_s:
  description: Seconds waited for the API.
  returned: when O(ready) is given, outside check mode
  type: float
  sample: 0.3
replaced:
  description: The unit of O(replaces.unit) stopped and disabled (in check mode, that would be), else empty.
  returned: when O(replaces) is given
  type: str
  sample: vllm-pd-proxy.service
port_refused_s:
  description:
    - Seconds from the first refused connection to the port to the first accepted one after it, while this unit
      took the port over; V(0.0) when no try was refused.
    - Null when the replaced unit was only stopped (this unit already ran) or nothing was replaced.
  returned: when O(replaces) is given, outside check mode
  type: float
  sample: 0.214
"""

import threading
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.secrets import api_key_of_file
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.unit_ready import (
    POLL_S, connect_once, final, not_ready, poll_ready, port_gap, replaced_unit, start, start_failure,
)


def journal(module, unit, lines):
    rc, out, dummy = module.run_command(['journalctl', '--unit', unit, '--no-pager', '-o', 'cat', '-n', str(lines)])
    return out.splitlines() if rc == 0 else []


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type='str', required=True),
            host=dict(type='str', default='this host'),
            start=dict(type='bool', default=True),
            restart=dict(type='bool', default=False),
            daemon_reload=dict(type='bool', default=False),
            ready=dict(type='dict', options=dict(
                url=dict(type='str', required=True),
                models_url=dict(type='str'),
                env_file=dict(type='path'),
                counts=dict(type='dict'),
                timeout=dict(type='int', default=600))),
            replaces=dict(type='dict', options=dict(
                unit=dict(type='str', required=True),
                address=dict(type='str', required=True),
                port=dict(type='int', required=True),
                timeout=dict(type='int', default=30)))),
        supports_check_mode=True)
    p = module.params
    unit = p['name']
    result = dict(changed=False, actions=[])
    replaces = p['replaces']
    old = replaces['unit'] if replaces and replaced_unit(replaces['unit'], module.run_command) else ''
    if replaces:
        result.update(replaced=old, port_refused_s=None)
    watch = {}

    def disable_old():
        """Stop and disable the replaced unit; systemctl's words when it failed, else None."""
        rc, out, err = module.run_command(['systemctl', 'disable', '--now', '--', old])
        return 'systemctl disable --now %s: %s' % (old, (err or out).strip()) if rc != 0 else None

    def stop_old():
        """disable_old, with the port tried from before the stop (a thread)."""
        watch['stopped'] = threading.Event()

        def run_watch():
            watch['gap'] = port_gap(lambda: connect_once(replaces['address'], replaces['port']), watch['stopped'].is_set)
        watch['thread'] = threading.Thread(target=run_watch)
        watch['thread'].daemon = True
        watch['thread'].start()
        error = disable_old()
        if error:
            watch['stopped'].set()
        return error

    if p['start']:
        actions, error = start(unit, p['restart'], p['daemon_reload'], module.run_command, module.check_mode,
                               before_start=stop_old if old else None)
        result['actions'] = actions
        result['changed'] = bool(actions) or bool(old)
        steps = (['disable --now %s' % old] if old else []) + ['%s %s' % (a, unit) for a in actions]
        if module._diff and steps:
            result['diff'] = dict(before='', after=''.join('systemctl %s\n' % step for step in steps))
        if error:
            module.fail_json(msg='\n'.join(start_failure(unit, p['host'], error, journal(module, unit, 20))), **result)
        if old and not module.check_mode:
            if 'thread' not in watch:  # this unit already ran: the replaced one only stops
                error = disable_old()
                if error:
                    module.fail_json(msg='%s on %s: %s' % (unit, p['host'], error), **result)
            else:
                watch['thread'].join(replaces['timeout'])
                watch['stopped'].set()
                watch['thread'].join()
                gap = watch.get('gap')
                if gap is None:
                    module.fail_json(msg='%s on %s started in place of %s, but %s:%d did not accept connections again '
                                         'within %d s.\nLast log lines:\n%s' % (
                                             unit, p['host'], old, replaces['address'], replaces['port'],
                                             replaces['timeout'], '\n'.join(journal(module, unit, 20))), **result)
                result['port_refused_s'] = round(gap, 3)
    if module.check_mode or not p['ready']:
        module.exit_json(**result)

    ready = p['ready']
    key = api_key_of_file(ready['env_file']) if ready['env_file'] else ''

    def state():
        return module.run_command(['systemctl', 'show', '--property=ActiveState', '--value', '--', unit])[1].strip()

    began = time.monotonic()
    while True:
        left = ready['timeout'] - (time.monotonic() - began)
        answer = poll_ready(ready['url'], max(left, 0), state, ready['models_url'], key, counts=ready['counts'])
        if final(answer) or left <= 0:
            break
        time.sleep(POLL_S)  # another success status than 200: ask again
    result.update(answer=answer, waited_s=round(time.monotonic() - began, 2))
    if answer != 'ready':
        module.fail_json(msg=not_ready(unit, p['host'], answer, ready['url'], ready['timeout'],
                                       '\n'.join(journal(module, unit, 30))), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
