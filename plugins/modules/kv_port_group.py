#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: kv_port_group
short_description: Check, free and verify the whole vLLM-Ascend Mooncake kv_port group
version_added: "1.0.0"
description:
  - With MooncakeConnectorV1, C(kv_port) is not one port but a group. Every worker of every local data-parallel
    rank binds a ZeroMQ ROUTER on C(VLLM_HOST_IP) at
    C(kv_port + dp_rank * tp_size * pp_size * pcp_size + device_index), device_index in C([0, tp_size*pp_size*pcp_size)).
    The module computes exactly that group and returns it as RV(ports).
  - O(state=free) is the preflight, run before vLLM starts. It fails when a port of the group is outside
    1024-65535, overlaps the AscendDirectTransport (ADXL) window, the Mooncake Transfer Engine RPC range 15000-17000,
    HCCL's 60000-60031, the API/proxy ports in O(extra_reserved), or lies in the kernel ephemeral range without
    being reserved. It also fails when a socket would block vLLM's bind on O(host_ip), naming the address, pid,
    process, cmdline, systemd unit and container of the holder. Units and containers listed in O(stop_services)
    that hold ports are stopped (and only those); nothing else is ever stopped or killed.
  - O(state=listening) waits until every port of the group listens on O(host_ip) and belongs to the expected
    service (O(owner_unit), O(owner_container) and/or O(owner_pid)). It fails early when a port is taken by another process
    (the Grafana trap), when the listener is on another address (VLLM_HOST_IP wrong), or when the unit died.
  - O(state=reachable) runs on a decode host against a prefill host. It connects to every port of the remote group
    in parallel and checks that a ZeroMQ peer answers with the ZMTP greeting. It names ports that are
    refused, time out, or speak another protocol such as HTTP. It never changes anything.
  - Each check reads the sockets of the module's network namespace once, from the kernel's sock_diag netlink
    interface filtered in the kernel to the group's ports (from C(/proc/net/tcp) and C(/proc/net/tcp6) when netlink
    is not available), and their owners once from C(/proc/*/fd); no C(ss) or C(lsof) per port.
attributes:
  check_mode:
    support: full
    details: In check mode nothing is stopped, disabled or written; RV(stopped) lists what would be stopped and
      RV(holders_off) what would be disabled.
  diff_mode:
    support: full
    details: Shows the holders of the group's ports, the enablement of the units it stops (and of their sockets),
      and the reserved-ports sysctl, before and after.
notes:
  - Run with C(become), otherwise sockets of other users have no visible owner.
  - The socket table is the one of the module's network namespace. A service in a container with its own
    network namespace is only seen when the module runs in that namespace.
  - C(IPV6_V6ONLY) is not visible in C(/proc); a listener on C(::) is taken as dual-stack and blocking.
  - Established connections whose local port is in the group block the bind; C(TIME_WAIT) does not
    (vLLM's ZeroMQ sets C(SO_REUSEADDR)).
  - Only C(kv_producer) (prefill) instances bind the group; run O(state=free) and O(state=listening) there.
seealso:
  - module: vllm_pd.ascend.mooncake_residue
extends_documentation_fragment:
  - vllm_pd.ascend.kv_port_group
  - vllm_pd.ascend.attributes
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Preflight the kv_port group of an 8-NPU prefill host, allowing Grafana to be stopped
  vllm_pd.ascend.kv_port_group:
    kv_port: 28002
    tp_size: 8
    host_ip: 10.0.30.10
    stop_services: [grafana-server.service]
    extra_reserved: ["8000", "8100"]
    owner_unit: vllm-pd-prefill.service   # its own ports (a running old instance) are no failure
    state: free
  become: true
  register: preflight

- name: Show the ports the running vLLM service still holds (freed by its restart)
  ansible.builtin.debug:
    msg: "{{ preflight.held_by_owner | map(attribute='endpoint') | list }}"
  when: preflight.held_by_owner | length > 0

- name: Reserve the group in the ephemeral range instead of failing
  vllm_pd.ascend.kv_port_group:
    kv_port: 36000
    tp_size: 8
    host_ip: 10.0.30.10
    reserve_ephemeral: true

- name: Wait until vllm-prefill.service owns every port of the group
  vllm_pd.ascend.kv_port_group:
    kv_port: 28002
    tp_size: 8
    host_ip: 10.0.30.10
    owner_unit: vllm-prefill.service
    state: listening
    timeout: 600
  become: true

- name: Prefill from the container image (the unit runs podman run --name vllm-pd-prefill); may stop a container
  vllm_pd.ascend.kv_port_group:
    kv_port: 28002
    tp_size: 8
    host_ip: 10.0.30.10
    owner_unit: vllm-pd-prefill.service
    owner_container: vllm-pd-prefill
    container_engine: podman
    stop_services: ["container:old-grafana"]
    state: free
  become: true

- name: Its ports must belong to the container vllm-pd-prefill
  vllm_pd.ascend.kv_port_group:
    kv_port: 28002
    tp_size: 8
    host_ip: 10.0.30.10
    owner_unit: vllm-pd-prefill.service
    owner_container: vllm-pd-prefill
    container_engine: podman
    state: listening
  become: true

- name: From the decode host, check that every prefill worker answers ZMTP
  vllm_pd.ascend.kv_port_group:
    kv_port: 28002
    tp_size: 8
    remote_host: 10.0.30.10
    state: reachable
    timeout: 30
"""

RETURN = r"""
ports:
  description: The port group, in order of DP rank and device index.
  returned: always
  type: list
  elements: int
  sample: [28002, 28003, 28004, 28005, 28006, 28007, 28008, 28009]
host_ip:
  description: The address checked (O(host_ip), or the wildcard when not given).
  returned: always
  type: str
  sample: 10.0.30.10
busy:
  description:
    - Sockets that block vLLM's bind on a port of the group (O(state=free)), found before any stop.
    - Sockets of the expected owner (O(owner_unit), O(owner_pid)) are in RV(held_by_owner) instead.
  returned: when state is free
  type: list
  elements: dict
  contains:
    port:
      description: The port.
      type: int
    address:
      description: Local address of the socket.
      type: str
    endpoint:
      description: Address and port.
      type: str
    state:
      description: TCP state, for example V(LISTEN) or V(ESTABLISHED); V(BOUND) for a socket found only by O(bind_probe).
      type: str
    pid:
      description: First pid holding the socket (null when not visible).
      type: int
    pids:
      description: All pids holding the socket.
      type: list
      elements: int
    process:
      description: Process name (comm).
      type: str
    cmdline:
      description: Command line.
      type: str
    unit:
      description: systemd unit from the pid's cgroup.
      type: str
    container:
      description:
        - Container id from the cgroup path, when the holder runs in a container other than the one the
          module runs in (on a host that is itself a container, its own processes are local).
      type: str
    container_runtime:
      description: Runtime of RV(busy[].container) (podman, docker, cri-o, containerd, kubernetes); only with a container.
      type: str
    container_name:
      description: Name of RV(busy[].container), from podman or docker; only when it could be read.
      type: str
  sample:
    - port: 28004
      address: 0.0.0.0
      endpoint: 0.0.0.0:28004
      state: LISTEN
      pid: 812
      pids: [812]
      process: grafana
      cmdline: /usr/share/grafana/bin/grafana server
      unit: grafana-server.service
      container: null
held_by_owner:
  description:
    - With O(state=free), sockets on ports of the group held by the process tree of O(owner_unit) or
      O(owner_pid), that is by the vLLM service about to be (re)started. Not a failure. Same fields as RV(busy).
  returned: when state is free
  type: list
  elements: dict
  sample:
    - port: 28003
      address: 10.0.30.10
      endpoint: 10.0.30.10:28003
      state: LISTEN
      pid: 4711
      pids: [4711]
      process: python3
      cmdline: vllm serve /models/m --kv-transfer-config ...
      unit: vllm-pd-prefill.service
      container: null
misleading:
  description:
    - Listeners on a port of the group but on another address, which do not block vLLM but make C(curl)
      or C(nc) on that address answer. Same fields as RV(busy).
  returned: when state is free or listening
  type: list
  elements: dict
stopped:
  description: Units and V(container:NAME) entries stopped (in check mode, those that would be stopped).
  returned: when state is free
  type: list
  elements: str
  sample: [grafana-server.service, "container:old-grafana"]
stopped_containers:
  description: The containers of RV(stopped), with the engine that stops (and can start) them again.
  returned: when state is free
  type: list
  elements: dict
  contains:
    name:
      description: Container name (or id when the name could not be read).
      type: str
    engine:
      description: V(podman) or V(docker).
      type: str
  sample: [{name: old-grafana, engine: docker}]
holders_off:
  description:
    - For each entry of RV(stopped), its state before and how it is kept off (see O(stop_services)); in check
      mode what would be done. The preflight records them in C(/etc/vllm-pd/stopped-services), one JSON object a line.
  returned: when state is free
  type: list
  elements: dict
  contains:
    kind:
      description: V(unit) or V(container).
      type: str
    name:
      description: Unit or container name.
      type: str
    enabled:
      description: The unit's C(UnitFileState) before (V(enabled), V(disabled), V(static), ...); units only.
      type: str
    active:
      description: Whether the unit or container was running before.
      type: bool
    disable:
      description: Whether the unit is (or would be) disabled; true only when it was enabled.
      type: bool
    sockets:
      description: The C(.socket) units that start this service (C(name), C(enabled), C(active), C(disable)).
      type: list
      elements: dict
    services:
      description: For a C(.socket) holder, the services it starts (same fields).
      type: list
      elements: dict
    engine:
      description: V(podman) or V(docker); containers only.
      type: str
    restart_policy:
      description: The container's restart policy before; containers only.
      type: str
    set_restart_no:
      description: Whether the restart policy is (or would be) set to V(no); containers only.
      type: bool
    restart_policy_changed:
      description: Whether the engine changed the restart policy (false when it cannot, podman 4); containers only.
      type: bool
  sample: [{kind: unit, name: grafana-server.service, enabled: enabled, active: true, disable: true, sockets: []}]
findings:
  description: One entry per problem found, each with a C(check) name (PortRange, AdxlWindow, TeRpcRange,
    HcclRange, ReservedPort, EphemeralRange, HostIp, PortBusy, PortClosed, WrongAddress, ForeignOwner,
    UnitInactive, NotReachable), the C(ports) and a C(msg).
  returned: always
  type: list
  elements: dict
  sample:
    - check: AdxlWindow
      ports: [20002, 20003]
      msg: port(s) 20002-20003 of the group overlap the AscendDirectTransport (ADXL/RDMA) window 20000-27999; ...
listeners:
  description: Listeners that own the group (O(state=listening)). Same fields as RV(busy).
  returned: when state is listening
  type: list
  elements: dict
probes:
  description: Per-port probe result (O(state=reachable)); C(result) is one of zmq, refused, timeout,
    unreachable, http, silent, closed, other, error.
  returned: when state is reachable
  type: list
  elements: dict
  sample:
    - {port: 28002, host: 10.0.30.10, result: zmq, detail: ZMTP greeting received}
    - {port: 28003, host: 10.0.30.10, result: http, detail: "HTTP server answered: HTTP/1.1 302 Found"}
adxl_window:
  description: The ADXL window checked, first and last port (empty when disabled).
  returned: always
  type: list
  elements: int
  sample: [20000, 27999]
npu_count:
  description: NPU count used for the ADXL window.
  returned: always
  type: int
  sample: 8
reserved_ports:
  description: Value of C(net.ipv4.ip_local_reserved_ports) after the run (in check mode, the value it would have).
  returned: when state is free
  type: str
  sample: 36000-36007
socket_source:
  description:
    - Where the socket table was read. V(sock_diag) is the kernel's NETLINK_SOCK_DIAG interface (the one C(ss) uses),
      asked for the group's ports only. V(proc) is C(/proc/net/tcp) and C(/proc/net/tcp6), used when netlink is not
      available (for example blocked by a seccomp profile).
  returned: when the socket table was read (state is free or listening)
  type: str
  choices: [sock_diag, proc]
  sample: sock_diag
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import params as P
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.host_ops import HostOps
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import port_group

DEFAULT_TIMEOUTS = dict(free=30, listening=300, reachable=0)


def argument_spec():
    return dict(
        kv_port=dict(type='int', required=True),
        tp_size=dict(type='int', default=1),
        pp_size=dict(type='int', default=1),
        pcp_size=dict(type='int', default=1),
        dp_rank_start=dict(type='int', default=0),
        dp_size_local=dict(type='int', default=1),
        host_ip=dict(type='str'),
        npu_count=dict(type='int'),
        ascend_base_port=dict(type='int'),
        adxl_window=dict(type='dict', options=dict(
            start=dict(type='int'), end=dict(type='int'), enabled=dict(type='bool', default=True))),
        te_rpc_range=dict(type='list', elements='int', default=[15000, 17000]),
        hccl_range=dict(type='list', elements='int', default=[60000, 60031]),
        extra_reserved=dict(type='list', elements='str', default=[]),
        reserve_ephemeral=dict(type='bool', default=False),
        bind_probe=dict(type='bool', default=True),
        stop_services=dict(type='list', elements='str', default=[]),
        ignore_checks=dict(type='list', elements='str', default=[]),
        owner_unit=dict(type='str'),
        owner_container=dict(type='str'),
        container_engine=dict(type='str', choices=['podman', 'docker']),
        owner_pid=dict(type='int'),
        remote_host=dict(type='str'),
        timeout=dict(type='int'),
        probe_timeout=dict(type='float', default=1.0),
        state=dict(type='str', choices=['free', 'listening', 'reachable'], default='free'),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                           required_if=[('state', 'listening', ['host_ip'])])
    p = dict(module.params)
    result = dict(changed=False, findings=[], ports=[])
    if p['timeout'] is None:
        p['timeout'] = DEFAULT_TIMEOUTS[p['state']]
    try:
        host_ip = P.kv_port_group_params(p)
    except P.ParamError as e:
        module.fail_json(msg=str(e), **result)
    result['ports'] = ports = port_group(p['kv_port'], p['tp_size'], p['pp_size'], p['pcp_size'],
                                         p['dp_rank_start'], p['dp_size_local'])
    # each state imports only its own code: the payload's sources are compiled at every run (issue 22)
    if p['state'] == 'reachable':
        from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.port_reachable import run_reachable
        run_reachable(module, p, ports, result)
        module.exit_json(**result)
    ops = HostOps(module)
    if host_ip is None:
        host_ip = '0.0.0.0'
        module.warn('host_ip not given: checking the group against every address (wildcard)')
    result['host_ip'] = host_ip
    if p['state'] == 'free':
        from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_stop import run_free
        run_free(module, ops, p, ports, host_ip, result)
    else:
        from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.port_listening import run_listening
        run_listening(module, ops, p, ports, host_ip, result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
