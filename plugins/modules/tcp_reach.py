#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: tcp_reach
short_description: Prove that peer hosts' chosen addresses are routed from this host, at the TCP level
version_added: "1.0.0"
description:
  - Connects once, in parallel, to a port of every target address. A SYN-ACK (something listens) or an
    RST (closed port, connection refused) proves the address is routed from this host; a timeout,
    C(EHOSTUNREACH) or C(ENETUNREACH) means it is not.
  - The preflight runs it before any host changes, from every decode host to each prefill host's
    C(VLLM_HOST_IP) and back, so a wrong but local address (a NIC the peer cannot reach) is refused
    before any engine starts. The whole check takes about O(timeout) seconds.
  - It never changes anything; an accepted connection is closed at once without sending data.
options:
  source:
    description: This host, named in the failure message.
    type: dict
    required: true
    suboptions:
      host:
        description: Inventory name of this host.
        type: str
        required: true
      role:
        description: What this host is (V(decode), V(prefill)).
        type: str
        default: ""
      address:
        description: This host's chosen address (its C(VLLM_HOST_IP)).
        type: str
        required: true
      interface:
        description: The NIC that address is on.
        type: str
        default: ""
  targets:
    description: The peers to reach.
    type: list
    elements: dict
    required: true
    suboptions:
      host:
        description: Inventory name of the peer.
        type: str
        required: true
      role:
        description: What the peer is (V(prefill), V(decode)).
        type: str
        default: ""
      address:
        description: The peer's chosen address.
        type: str
        required: true
      interface:
        description: The NIC of the peer that address is on.
        type: str
        default: ""
      port:
        description: TCP port to connect to; closed is fine (an RST proves the route).
        type: int
        required: true
      var:
        description: The inventory variable that sets the peer's address, named in the fix.
        type: str
        default: vllm_pd_host_ip
  cluster:
    description: Cluster name, named in the failure message.
    type: str
    default: ""
  timeout:
    description: Seconds each connect may take (all run in parallel); more than 0 and at most 30.
    type: float
    default: 2.0
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
  - vllm_pd.ascend.attributes.read_only
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: From the decode host, every prefill host's VLLM_HOST_IP must be routed
  vllm_pd.ascend.tcp_reach:
    cluster: c1
    source: {host: d1, role: decode, address: 10.0.30.20, interface: ens1f0}
    targets:
      - {host: p1, role: prefill, address: 10.0.30.10, interface: ens1f0, port: 28002}
    timeout: 2
"""

RETURN = r"""
results:
  description: One probe per target, with the target's fields.
  returned: always
  type: list
  elements: dict
  contains:
    result:
      description: V(open), V(refused) (RST), V(timeout), V(unreachable) or V(error).
      type: str
    routed:
      description: Whether the address answered at the TCP level (open or refused).
      type: bool
    detail:
      description: What happened, with the errno name.
      type: str
    seconds:
      description: How long the connect took.
      type: float
  sample:
    - {host: p1, address: 10.0.30.10, port: 28002, result: refused, routed: true, seconds: 0.001,
       detail: "RST: the address answers, the port is closed (ECONNREFUSED)"}
unreachable:
  description: The failure lines, one per target that is not routed (empty on success).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.tcp_reach import probe_targets, unreachable_message


def argument_spec():
    return dict(
        source=dict(type='dict', required=True, options=dict(
            host=dict(type='str', required=True), role=dict(type='str', default=''),
            address=dict(type='str', required=True), interface=dict(type='str', default=''))),
        targets=dict(type='list', elements='dict', required=True, options=dict(
            host=dict(type='str', required=True), role=dict(type='str', default=''),
            address=dict(type='str', required=True), interface=dict(type='str', default=''),
            port=dict(type='int', required=True), var=dict(type='str', default='vllm_pd_host_ip'))),
        cluster=dict(type='str', default=''),
        timeout=dict(type='float', default=2.0),
    )


def validate(params):
    """Error text for a bad parameter, or None."""
    if not 0 < params['timeout'] <= 30:
        return 'timeout must be more than 0 and at most 30 seconds, got %s' % params['timeout']
    for t in params['targets']:
        if not 1 <= t['port'] <= 65535:
            return 'targets: port %s of host %s is not in 1-65535' % (t['port'], t['host'])
        if not t['address'].strip():
            return 'targets: host %s has an empty address' % t['host']
    return None


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    p = module.params
    err = validate(p)
    if err:
        module.fail_json(msg=err, results=[], unreachable=[])
    results = probe_targets(p['targets'], timeout=p['timeout'])
    lines = [unreachable_message(p['source'], r, p['cluster'] or None) for r in results if not r['routed']]
    if lines:
        module.fail_json(msg=' | '.join(lines), results=results, unreachable=lines)
    module.exit_json(changed=False, results=results, unreachable=[])


if __name__ == '__main__':
    main()
