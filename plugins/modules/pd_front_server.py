#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: pd_front_server
short_description: Drain one process of the proxy tier in HAProxy until it has no request, or set it ready
version_added: "1.0.0"
description:
  - Talks to the runtime API of the proxy tier's HAProxy (C(vllm-pd-front.service)) on its local admin socket
    (AF_UNIX, no shell).
  - V(drain) sets the server to drain (HAProxy sends it no new request) and waits until HAProxy's own count of
    requests on it is 0 (C(scur) of C(show stat), and nothing queued for it, C(qcur)), so the process can restart
    without cutting a request. The proxy role runs it before it restarts a changed process.
  - V(ready) sets the server ready and waits until HAProxy's health check has it C(UP), so the next process can be
    drained while this one takes traffic.
  - When HAProxy is not running (no socket, or nothing listens on it) or its running configuration has no such
    server yet (a process this run adds), it does nothing and reports RV(front) as V(down) or V(absent).
options:
  state:
    description: V(drain) before a restart, V(ready) after it.
    type: str
    choices: [drain, ready]
    required: true
  server:
    description: HAProxy's name of the process (C(proxy1) for C(vllm-pd-proxy@1.service); the proxy role passes
      the name C(pd_proxy_front) planned).
    type: str
    required: true
  backend:
    description: HAProxy's backend of the proxy processes.
    type: str
    default: proxies
  socket:
    description: HAProxy's admin socket.
    type: path
    default: /run/vllm-pd-front/admin.sock
  unit:
    description: The systemd unit of the process, named in a failure.
    type: str
    default: ""
  timeout:
    description: Seconds to wait for 0 requests (V(drain)) or for C(UP) (V(ready)); at least 1.
    type: int
    default: 900
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
attributes:
  check_mode:
    support: full
    details: Reads the server's state and reports whether it would change it; sets nothing and waits for nothing.
  diff_mode:
    support: full
    details: The server's administrative state (V(ready) or V(drain)) before and after.
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Drain process 1 in HAProxy and wait until it has no request in flight
  vllm_pd.ascend.pd_front_server:
    state: drain
    server: proxy1
    unit: vllm-pd-proxy@1.service
    timeout: 900

- name: Set it ready once it answers its health route again
  vllm_pd.ascend.pd_front_server:
    state: ready
    server: proxy1
    unit: vllm-pd-proxy@1.service
    timeout: 30
"""

RETURN = r"""
front:
  description: V(running); V(down) when HAProxy does not answer on the socket, V(absent) when its running
    configuration has no such server (nothing was done in either case).
  returned: always
  type: str
  sample: running
before:
  description: The server's administrative state before (V(ready), V(drain)); null when RV(front) is not
    V(running).
  returned: always
  type: str
  sample: ready
after:
  description: The state asked for; null when RV(front) is not V(running).
  returned: always
  type: str
  sample: drain
seen:
  description: HAProxy's counts of requests on the server while waiting, one entry each time they changed.
  returned: always
  type: list
  elements: dict
  contains:
    in_flight:
      description: Requests HAProxy has on the server (C(scur)).
      type: int
    queued:
      description: Requests queued for the server (C(qcur)).
      type: int
  sample: [{in_flight: 2, queued: 0}, {in_flight: 1, queued: 0}, {in_flight: 0, queued: 0}]
waited:
  description: Seconds waited for 0 requests or for C(UP).
  returned: always
  type: float
  sample: 3.4
status:
  description: HAProxy's last status of the server (V(UP), V(DRAIN), V(DOWN) ...).
  returned: always
  type: str
  sample: DRAIN
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import front_server


def argument_spec():
    return dict(
        state=dict(type='str', choices=list(front_server.STATES), required=True),
        server=dict(type='str', required=True),
        backend=dict(type='str', default=proxy_front.BACKEND),
        socket=dict(type='path', default=proxy_front.ADMIN_SOCKET),
        unit=dict(type='str', default=''),
        timeout=dict(type='int', default=900),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    p = module.params
    if p['timeout'] < 1:
        module.fail_json(msg='timeout must be at least 1 second, got %s' % p['timeout'])
    res = front_server.run(p['state'], p['server'], backend=p['backend'], socket_path=p['socket'], unit=p['unit'],
                           timeout=p['timeout'], check_mode=module.check_mode)
    if res['changed'] and module._diff:
        res['diff'] = dict(before='%s/%s: %s\n' % (p['backend'], p['server'], res['before']),
                           after='%s/%s: %s\n' % (p['backend'], p['server'], res['after']))
    if res.pop('failed', False):
        module.fail_json(**res)
    module.exit_json(**res)


if __name__ == '__main__':
    main()
