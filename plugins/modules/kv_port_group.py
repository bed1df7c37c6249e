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
options:
  kv_port:
    description:
      - The C(kv_port) of C(--kv-transfer-config), the first port of the group.
    type: int
    required: true
  tp_size:
    description: Tensor-parallel size of the vLLM instance.
    type: int
    default: 1
  pp_size:
    description: Pipeline-parallel size.
    type: int
    default: 1
  pcp_size:
    description: Prefill context-parallel size.
    type: int
    default: 1
  dp_rank_start:
    description: First data-parallel rank that runs on this host.
    type: int
    default: 0
  dp_size_local:
    description: Number of data-parallel ranks on this host.
    type: int
    default: 1
  host_ip:
    description:
      - The address vLLM binds, that is the value of C(VLLM_HOST_IP) on this host.
      - Required for O(state=listening). For O(state=free) it defaults to the wildcard V(0.0.0.0), the most
        conservative choice (anything holding a port of the group blocks).
      - For O(state=reachable) it is the prefill host's address when O(remote_host) is not given.
    type: str
  npu_count:
    description:
      - Number of NPUs of the host, used for the default ADXL window.
      - Default is the number of C(/dev/davinciN) devices; when there are none, V(8) (with a warning).
    type: int
  ascend_base_port:
    description:
      - C(ASCEND_BASE_PORT) of the vLLM process, the start of the ADXL window.
      - Default is the environment variable C(ASCEND_BASE_PORT) of the module process, else V(20000).
    type: int
  adxl_window:
    description:
      - Override of the AscendDirectTransport (RDMA) port window the group must avoid.
      - Default is the conservative C([ascend_base_port, ascend_base_port + 1000 * npu_count - 1]) of the
        vLLM-Ascend docs (Mooncake v0.3.7 used 1000 ports per device; newer versions 100).
    type: dict
    suboptions:
      start:
        description: First port of the window.
        type: int
      end:
        description: Last port of the window (inclusive).
        type: int
      enabled:
        description: Set V(false) to skip the ADXL check (hosts without AscendDirectTransport).
        type: bool
        default: true
  te_rpc_range:
    description:
      - First and last port of the Mooncake Transfer Engine RPC range (C(MC_MIN_RPC_PORT), C(MC_MAX_RPC_PORT)).
      - An empty list disables the check.
    type: list
    elements: int
    default: [15000, 17000]
  hccl_range:
    description:
      - First and last port HCCL uses (C(HCCL_IF_BASE_PORT) and the next 31). An empty list disables the check.
    type: list
    elements: int
    default: [60000, 60031]
  extra_reserved:
    description:
      - Ports or ranges (V(8000), V(9000-9010)) of other services of the deployment, such as the vLLM API port
        and the proxy port, that must not fall inside the group.
    type: list
    elements: str
    default: []
  reserve_ephemeral:
    description:
      - When ports of the group lie in the kernel ephemeral range (C(net.ipv4.ip_local_port_range)) and are
        not reserved, add them to C(net.ipv4.ip_local_reserved_ports) by writing
        C(/proc/sys/net/ipv4/ip_local_reserved_ports) (runtime only; persist it in C(/etc/sysctl.d)).
      - When V(false), such ports are a failure whose message names the sysctl line to add.
    type: bool
    default: false
  bind_probe:
    description:
      - With O(state=free), also try C(bind()) on O(host_ip) for every port of the group that looks free (with
        C(SO_REUSEADDR), like ZeroMQ; the socket is closed at once and never listens). This catches sockets that
        are bound but not listening, which neither sock_diag nor C(/proc/net/tcp) shows.
    type: bool
    default: true
  ignore_checks:
    description:
      - With O(state=free), findings of these checks (V(PortRange), V(AdxlWindow), V(TeRpcRange), V(HcclRange),
        V(ReservedPort), V(EphemeralRange), V(PortBusy), V(HostIp)) become warnings instead of a failure
        (inventory V(vllm_pd_ignore_checks)); the holders of an ignored V(PortBusy) are left alone.
    type: list
    elements: str
    default: []
    version_added: "1.1.0"
  stop_services:
    description:
      - systemd units the operator allows the preflight to stop when they hold a port of the group
        (for example V(grafana-server.service)). A name without suffix gets C(.service).
      - An entry V(container:NAME) allows a podman or docker container (by name, or by its 12- or
        64-character id) instead; it is stopped with C(podman stop NAME) or C(docker stop NAME), the
        engine that runs it (told by the holder's cgroup).
      - Only these units and containers are stopped. Holders outside the list, and processes that
        belong to no unit, are never stopped or killed; they are a failure that names them.
    type: list
    elements: str
    default: []
  owner_unit:
    description:
      - The systemd unit expected to own the group (the vLLM prefill service).
      - A socket belongs to it when a pid holding it has the unit's cgroup or descends from the unit's MainPID.
      - With O(state=listening), every port must listen and belong to it.
      - With O(state=free), ports held by the unit's process tree are the service the deployment is about to
        (re)start, for example after O(kv_port) changed while the old instance still runs. They are returned in
        RV(held_by_owner), are no failure, and the unit is never stopped by this module (the restart frees them).
    type: str
  owner_container:
    description:
      - Name of the podman or docker container expected to own the group (the vLLM prefill engine when it runs
        from a container image, for example V(vllm-pd-prefill)).
      - Needed next to O(owner_unit) when the unit runs C(podman run) or C(docker run), because the container's
        processes are children of conmon or containerd-shim, neither in the unit's cgroup nor below its MainPID.
      - A socket belongs to it when a pid holding it is in that container's cgroup or descends from the
        container's init pid (from C(ENGINE container inspect)). Anything else is still foreign.
      - Used like O(owner_unit) in O(state=listening) and O(state=free). A container that does not exist (yet)
        owns nothing.
    type: str
  container_engine:
    description:
      - The engine that runs O(owner_container). Default is whichever of C(podman) and C(docker) is installed
        and knows the container.
    type: str
    choices: [podman, docker]
  owner_pid:
    description:
      - Pid expected to own the group (the listener pid or one of its ancestors). Used like O(owner_unit), in
        both O(state=listening) and O(state=free).
    type: int
  remote_host:
    description:
      - For O(state=reachable), the prefill host's C(VLLM_HOST_IP) to probe. Default O(host_ip).
    type: str
  timeout:
    description:
      - Seconds to wait. O(state=free) waits this long for ports to be released after stopping units
        (default V(30)); O(state=listening) waits for the group to listen (default V(300)); O(state=reachable)
        keeps retrying failing ports this long (default V(0), a single round).
    type: int
  probe_timeout:
    description:
      - Seconds for each TCP connect and for the ZMTP greeting in O(state=reachable).
    type: float
    default: 1.0
  state:
    description:
      - V(free) checks the group before vLLM starts (and stops allowed units).
      - V(listening) verifies the group after start. V(reachable) probes a remote group over ZMTP.
    type: str
    choices: [free, listening, reachable]
    default: free
attributes:
  check_mode:
    support: full
    details: In check mode nothing is stopped and no sysctl is written; RV(stopped) lists what would be stopped.
  diff_mode:
    support: full
    details: Shows the holders of the group's ports (and the reserved-ports sysctl) before and after.
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

import errno
import os
import socket
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_pd.ascend.plugins.module_utils import owners as owners_mod
from ansible_collections.vllm_pd.ascend.plugins.module_utils.port_checks import (
    CONTAINER_PREFIX, build_holders, describe_holder, evaluate_listening, holder_lines, normalize_unit,
    parse_stop_services, plan_stops, split_holders, stop_target,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.port_group import (
    DEFAULT_ASCEND_BASE_PORT, DEFAULT_NPU_COUNT, adxl_window, detect_npu_count,
    format_port_list, parse_port_list, port_group, range_findings, read_sysctl_ranges,
    reserved_with, span,
)
from ansible_collections.vllm_pd.ascend.plugins.module_utils.sock_diag import read_tcp_table
from ansible_collections.vllm_pd.ascend.plugins.module_utils.sockets import (
    classify, format_endpoint, is_wildcard, normalize_ip,
)

DEFAULT_TIMEOUTS = dict(free=30, listening=300, reachable=0)
POLL = 0.25


class HostOps(object):
    """Everything the module reads from or does to the host, in one place (tests replace parts)."""

    def __init__(self, module, proc_root='/proc', dev_root='/dev'):
        self.module = module
        self.proc_root = proc_root
        self.dev_root = dev_root
        self._info = {}
        self._names = {}
        self._own_containers = owners_mod.own_containers(proc_root)
        self.socket_source = None

    def reset(self):
        self._info = {}

    def sockets(self, ports):
        socks, self.socket_source = read_tcp_table(self.proc_root, ports=ports)
        return socks

    def owners(self, inodes):
        return owners_mod.socket_owners(self.proc_root, inodes)

    def process_info(self, pid):
        if pid not in self._info:
            info = owners_mod.process_info(pid, self.proc_root, self._own_containers)
            if info.get('container'):
                info['container_name'] = self.container_name(info.get('container_runtime'), info['container'])
            self._info[pid] = info
        return self._info[pid]

    def container_name(self, runtime, cid):
        """Name of a holder's container: docker's config file, else ENGINE container inspect (cached per id)."""
        key = (runtime, cid)
        if key not in self._names:
            name = owners_mod.resolve_container_name(dict(runtime=runtime, id=cid))
            if name is None and runtime in ('podman', 'docker'):
                found = self.container_inspect(runtime, cid)
                name = found['name'] if found else None
            self._names[key] = name
        return self._names[key]

    def container_inspect(self, engine, ref):
        """{'id', 'pid', 'name'} of container REF from ENGINE (podman/docker), or None (no engine, no such container)."""
        path = self.module.get_bin_path(engine)
        if not path:
            return None
        rc, out, _err = self.module.run_command(
            [path, 'container', 'inspect', '--format', '{{.Id}} {{.State.Pid}} {{.Name}}', ref])
        return owners_mod.parse_container_inspect(out) if rc == 0 else None

    def stop_container(self, engine, name):
        path = self.module.get_bin_path(engine)
        if not path:
            return 127, '%s is not installed' % engine
        rc, _out, err = self.module.run_command([path, 'stop', name])
        return rc, err

    def is_descendant(self, pid, ancestor):
        return owners_mod.is_descendant(pid, ancestor, self.proc_root)

    def pid_alive(self, pid):
        return owners_mod.pid_alive(pid, self.proc_root)

    def npu_count(self):
        return detect_npu_count(self.dev_root)

    def sysctl_ranges(self):
        return read_sysctl_ranges(self.proc_root)

    def write_reserved(self, value):
        path = os.path.join(self.proc_root, 'sys/net/ipv4/ip_local_reserved_ports')
        with open(path, 'w') as f:
            f.write(value + '\n')

    def _systemctl(self):
        return self.module.get_bin_path('systemctl', required=True)

    def stop_unit(self, unit):
        rc, _out, err = self.module.run_command([self._systemctl(), 'stop', '--', unit])
        return rc, err

    def unit_show(self, unit):
        rc, out, err = self.module.run_command(
            [self._systemctl(), 'show', '-p', 'LoadState', '-p', 'ActiveState', '-p', 'SubState',
             '-p', 'MainPID', '-p', 'Result', '--', unit])
        if rc != 0:
            return dict(error=err.strip() or 'systemctl show failed (rc=%d)' % rc)
        return owners_mod.parse_systemctl_show(out)

    def bind_probe(self, host_ip, port):
        """errno of bind(host_ip, port) with SO_REUSEADDR, or None when it works."""
        family = socket.AF_INET6 if ':' in host_ip else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host_ip, port))
        except socket.error as e:
            return getattr(e, 'errno', None) or -1
        finally:
            s.close()
        return None

    def host_ip_local(self, host_ip):
        """None if host_ip can be bound here, else the error text."""
        family = socket.AF_INET6 if ':' in host_ip else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.bind((host_ip, 0))
        except socket.error as e:
            if getattr(e, 'errno', None) == errno.EADDRNOTAVAIL:
                return str(e)
            return None
        finally:
            s.close()
        return None


def snapshot(ops, ports, host_ip):
    """One read of the socket tables and one fd scan -> (blocking holders, misleading holders)."""
    ops.reset()
    socks = ops.sockets(ports)
    blocking, misleading = classify(socks, ports, host_ip)
    owners = ops.owners([s['inode'] for s in blocking + misleading])
    return (build_holders(blocking, owners, ops.process_info),
            build_holders(misleading, owners, ops.process_info))


def listeners_snapshot(ops, ports):
    ops.reset()
    socks = [s for s in ops.sockets(ports) if s['state'] == 'LISTEN']
    owners = ops.owners([s['inode'] for s in socks])
    return build_holders(socks, owners, ops.process_info)


def summarize(findings, head):
    return '%s: %s' % (head, ' | '.join('[%s] %s' % (f['check'], f['msg']) for f in findings))


def public_findings(findings):
    """Findings without bulky holder copies (holders are in busy/listeners)."""
    out = []
    for f in findings:
        g = dict((k, v) for k, v in f.items() if k != 'holders')
        out.append(g)
    return out


def misleading_warning(module, holders, host_ip):
    for h in holders:
        module.warn('port %d also listens on %s, not on %s: %s; it does not block vLLM but curl/nc to that '
                    'address will answer and mislead' % (h['port'], h['address'], host_ip, describe_holder(h)))


def static_checks(module, ops, params, ports, result):
    npu = params['npu_count']
    if npu is None:
        npu = ops.npu_count()
        if npu == 0:
            npu = DEFAULT_NPU_COUNT
            module.warn('no /dev/davinciN device found; assuming %d NPUs for the ADXL window '
                        '(set npu_count or adxl_window to override)' % npu)
    result['npu_count'] = npu
    base = params['ascend_base_port']
    if base is None:
        try:
            base = int(os.environ.get('ASCEND_BASE_PORT') or DEFAULT_ASCEND_BASE_PORT)
        except ValueError:
            module.fail_json(msg='ASCEND_BASE_PORT=%r in the environment is not a port number; set '
                                 'ascend_base_port' % os.environ.get('ASCEND_BASE_PORT'), **result)
    aw = params['adxl_window'] or {}
    window = None
    if aw.get('enabled', True):
        start = aw['start'] if aw.get('start') is not None else base
        if aw.get('end') is not None:
            window = (start, aw['end']) if aw['end'] >= start else None
        else:
            window = adxl_window(start, npu)
    result['adxl_window'] = list(window) if window else []
    windows = [('AdxlWindow', 'AscendDirectTransport (ADXL/RDMA) window', window,
                'Mooncake picks random listen ports there, so the bind fails intermittently with "Address '
                'already in use"; use kv_port >= %d' % ((window[1] + 1) if window else 0))]
    for name, key, label, hint in (
            ('TeRpcRange', 'te_rpc_range', 'Mooncake Transfer Engine RPC range',
             'the Transfer Engine binds a random port there (MC_MIN_RPC_PORT/MC_MAX_RPC_PORT); move kv_port'),
            ('HcclRange', 'hccl_range', 'HCCL port range (HCCL_IF_BASE_PORT)', 'move kv_port or HCCL_IF_BASE_PORT')):
        rng = params[key] or []
        if not rng:
            continue
        if len(rng) != 2:
            module.fail_json(msg='%s must be [first, last], got %r' % (key, rng), **result)
        windows.append((name, label, (min(rng), max(rng)), hint))
    extra = []
    for item in params['extra_reserved']:
        try:
            extra.extend(parse_port_list(str(item)))
        except ValueError:
            module.fail_json(msg='extra_reserved item %r is not a port or a range like 9000-9010' % item, **result)
    ephemeral, reserved = ops.sysctl_ranges()
    findings = range_findings(ports, windows, ephemeral, reserved, extra)
    return findings, reserved


def host_ip_finding(ops, host_ip):
    if is_wildcard(host_ip):
        return None
    err = ops.host_ip_local(host_ip)
    if err is None:
        return None
    return dict(check='HostIp', ports=[], msg='host_ip %s is not an address of this host (%s): vLLM would fail '
                'with "Cannot assign requested address"; set VLLM_HOST_IP to this host\'s inter-node IP' % (
                    host_ip, err))


def main_pid_of(show):
    try:
        return int(show.get('MainPID') or 0) or None
    except ValueError:
        return None


def held_by(ops, h, owner_unit, main_pid, owner_pid, container=None):
    """True when a pid of holder h is in the owner's process tree: its cgroup is owner_unit, or it
    descends from the unit's MainPID or from owner_pid, or it runs in the owner container (its cgroup
    names the container's id, or it descends from the container's init pid)."""
    for pid in h.get('pids') or []:
        if owner_unit and ops.process_info(pid).get('unit') == owner_unit:
            return True
        if main_pid and ops.is_descendant(pid, main_pid):
            return True
        if owner_pid and ops.is_descendant(pid, owner_pid):
            return True
        if container and (ops.process_info(pid).get('container') == container['id']
                          or (container.get('pid') and ops.is_descendant(pid, container['pid']))):
            return True
    return False


def find_owner_container(ops, params):
    """{'id', 'pid', 'name'} of O(owner_container), or None when not given or not there (yet)."""
    name = params['owner_container']
    if not name:
        return None
    for engine in [params['container_engine']] if params['container_engine'] else ['podman', 'docker']:
        found = ops.container_inspect(engine, name)
        if found:
            return found
    return None


def owner_label(params, owner_unit):
    parts = [owner_unit] if owner_unit else []
    if params['owner_container']:
        parts.append('container %s' % params['owner_container'])
    if params['owner_pid']:
        parts.append('pid %s' % params['owner_pid'])
    return ' / '.join(parts)


def owner_predicate(ops, params):
    """holder -> bool for O(owner_unit)/O(owner_container)/O(owner_pid) in state=free, or None when none is given."""
    owner_unit = normalize_unit(params['owner_unit']) if params['owner_unit'] else None
    owner_pid = params['owner_pid']
    if not owner_unit and not owner_pid and not params['owner_container']:
        return None
    main_pid = None
    if owner_unit:
        show = ops.unit_show(owner_unit)
        # not loaded or not queryable: the cgroup match alone still finds its processes
        main_pid = main_pid_of(show) if 'error' not in show else None
    container = find_owner_container(ops, params)
    return lambda h: held_by(ops, h, owner_unit, main_pid, owner_pid, container)


def run_free(module, ops, params, ports, host_ip, result):
    try:
        allowed_units, allowed_containers = parse_stop_services(params['stop_services'])
    except ValueError as e:
        module.fail_json(msg='%s; fix vllm_pd_stop_services (write container:NAME for a container)' % e, **result)
    findings, reserved = static_checks(module, ops, params, ports, result)
    hf = host_ip_finding(ops, host_ip)
    if hf:
        findings.append(hf)
    reserve_ports = []
    if params['reserve_ephemeral']:
        keep = []
        for f in findings:
            if f['check'] == 'EphemeralRange':
                reserve_ports.extend(f['ports'])
            else:
                keep.append(f)
        findings = keep
    result['reserved_ports'] = format_port_list(reserved)

    busy, misleading = snapshot(ops, ports, host_ip)
    result['socket_source'] = ops.socket_source
    if params['bind_probe'] and not hf:
        seen = set(h['port'] for h in busy)
        for port in ports:
            if port in seen or not 1024 <= port <= 65535:
                continue
            if ops.bind_probe(host_ip, port) == errno.EADDRINUSE:
                busy.append(dict(port=port, address=host_ip, family='tcp6' if ':' in host_ip else 'tcp',
                                 state='BOUND', inode=None, endpoint=format_endpoint(host_ip, port), pids=[],
                                 pid=None, process=None, cmdline=None, unit=None, container=None))
    is_owner = owner_predicate(ops, params) if busy else None
    owned, busy = split_holders(busy, is_owner)
    result['busy'] = busy
    result['held_by_owner'] = owned
    result['misleading'] = misleading
    misleading_warning(module, misleading, host_ip)
    to_stop, busy_findings = plan_stops(busy, params['stop_services'])
    findings.extend(busy_findings)
    # vllm_pd_ignore_checks: the operator accepts these; a warning each, no failure
    for f in [f for f in findings if f['check'] in params['ignore_checks']]:
        module.warn('ignored by vllm_pd_ignore_checks: [%s] %s' % (f['check'], f['msg']))
    findings = [f for f in findings if f['check'] not in params['ignore_checks']]
    result['findings'] = public_findings(findings)
    if findings:
        module.fail_json(msg=summarize(findings, 'kv_port group %s on %s is not usable; nothing was stopped or '
                                                 'changed' % (span(ports), host_ip)), **result)

    before = holder_lines(busy)
    after = holder_lines([h for h in busy if stop_target(h, allowed_units, allowed_containers) is None])
    new_reserved, reserve_changes = reserved_with(reserved, reserve_ports) if reserve_ports else (reserved, False)
    engines = dict((stop_target(h, allowed_units, allowed_containers), h.get('container_runtime')) for h in busy)
    result['stopped'] = to_stop
    result['stopped_containers'] = [dict(name=t[len(CONTAINER_PREFIX):], engine=engines[t])
                                    for t in to_stop if t.startswith(CONTAINER_PREFIX)]
    result['reserved_ports'] = format_port_list(new_reserved)
    result['changed'] = bool(to_stop) or reserve_changes
    if module._diff:
        b = list(before) + ['net.ipv4.ip_local_reserved_ports = %s' % format_port_list(reserved)]
        a = list(after) + ['net.ipv4.ip_local_reserved_ports = %s' % format_port_list(new_reserved)]
        result['diff'] = dict(before_header='listeners/sysctl before', after_header='listeners/sysctl after',
                              before='\n'.join(b) + '\n', after='\n'.join(a) + '\n')
    if module.check_mode or not result['changed']:
        return
    if reserve_changes:
        try:
            ops.write_reserved(format_port_list(new_reserved))
        except (IOError, OSError) as e:
            module.fail_json(msg='cannot write net.ipv4.ip_local_reserved_ports = %s (%s); add that line to '
                                 '/etc/sysctl.d and run sysctl --system, or pick a kv_port below the ephemeral '
                                 'range' % (format_port_list(new_reserved), e), **result)
    for target in to_stop:
        held = span([h['port'] for h in busy if stop_target(h, allowed_units, allowed_containers) == target])
        if target.startswith(CONTAINER_PREFIX):
            name = target[len(CONTAINER_PREFIX):]
            rc, err = ops.stop_container(engines[target], name)
            if rc != 0:
                module.fail_json(msg='%s stop %s failed (rc=%d): %s; the container holds port(s) %s of the kv_port '
                                     'group; stop it by hand or pick another kv_port' % (
                                         engines[target], name, rc, (err or '').strip(), held), **result)
            continue
        rc, err = ops.stop_unit(target)
        if rc != 0:
            module.fail_json(msg='systemctl stop %s failed (rc=%d): %s; it holds port(s) %s of the kv_port group; '
                                 'stop it by hand or pick another kv_port' % (
                                     target, rc, (err or '').strip(), held), **result)
    deadline = time.time() + params['timeout']
    while True:
        still = split_holders(snapshot(ops, ports, host_ip)[0], is_owner)[1]
        if not still:
            return
        if time.time() >= deadline:
            break
        time.sleep(POLL)
    remaining = plan_stops(still, [])[1]
    fail = [dict(check='PortBusy', ports=f['ports'], msg=f['msg'].replace(
        'busy:', 'still busy %ds after stopping %s:' % (params['timeout'], ', '.join(to_stop)), 1)) for f in remaining]
    result['findings'] = fail
    module.fail_json(msg=summarize(fail, 'kv_port group %s on %s is still not free (a unit restarted itself, a '
                                         'socket unit re-listens, or a holder lives outside the unit)' % (
                                             span(ports), host_ip)), **result)


def _unit_dead(show):
    active = show.get('ActiveState')
    sub = show.get('SubState')
    if show.get('LoadState') == 'not-found':
        return 'is not loaded (LoadState=not-found)'
    if active in ('failed', 'inactive') or sub == 'auto-restart':
        return 'is %s/%s (Result=%s)' % (active, sub, show.get('Result'))
    return None


def run_listening(module, ops, params, ports, host_ip, result):
    owner_unit = normalize_unit(params['owner_unit']) if params['owner_unit'] else None
    owner_pid = params['owner_pid']
    anyone = not owner_unit and not owner_pid and not params['owner_container']
    if anyone:
        module.warn('neither owner_unit nor owner_pid given: any listener on %s counts; a foreign service on a '
                    'port of the group (the Grafana trap) is not detected' % host_ip)
    hf = host_ip_finding(ops, host_ip)
    if hf:
        result['findings'] = [hf]
        module.fail_json(msg=summarize([hf], 'kv_port group %s cannot listen on %s' % (span(ports), host_ip)), **result)
    deadline = time.time() + params['timeout']
    main_pid = [None]
    container = [None]

    def is_expected(h):
        if anyone:
            return None
        return held_by(ops, h, owner_unit, main_pid[0], owner_pid, container[0])

    while True:
        if owner_unit:
            show = ops.unit_show(owner_unit)
            dead = _unit_dead(show) if 'error' not in show else 'cannot be queried (%s)' % show['error']
            if dead:
                f = dict(check='UnitInactive', ports=list(ports), msg='%s %s while waiting for the kv_port group %s '
                         'on %s; see journalctl -u %s (look for "KVCacheSendingThread" and "Address already in use")'
                         % (owner_unit, dead, span(ports), host_ip, owner_unit))
                result['findings'] = [f]
                module.fail_json(msg=summarize([f], 'vLLM did not come up'), **result)
            main_pid[0] = main_pid_of(show)
        if owner_pid and not ops.pid_alive(owner_pid):
            f = dict(check='UnitInactive', ports=list(ports),
                     msg='owner pid %d exited while waiting for the kv_port group %s on %s' % (
                         owner_pid, span(ports), host_ip))
            result['findings'] = [f]
            module.fail_json(msg=summarize([f], 'vLLM did not come up'), **result)
        holders = listeners_snapshot(ops, ports)
        # created by the unit's "run" a moment after the unit started: look again each round, after the
        # snapshot, so a listener seen there belongs to a container that exists by now
        container[0] = find_owner_container(ops, params)
        result['socket_source'] = ops.socket_source
        ev = evaluate_listening(ports, host_ip, holders, is_expected)
        result['listeners'] = ev['ok']
        result['misleading'] = ev['misleading']
        findings = []
        if ev['foreign']:
            findings.append(dict(check='ForeignOwner', ports=sorted(set(h['port'] for h in ev['foreign'])),
                                 msg='port(s) of the group are held by another service, not by %s: %s; vLLM cannot '
                                     'bind them (curl to them answers and misleads); stop that service (or add it to '
                                     'vllm_pd_stop_services and rerun the preflight) or pick another kv_port' % (
                                         owner_label(params, owner_unit),
                                         '; '.join(describe_holder(h) for h in ev['foreign']))))
        if ev['wrong_address']:
            findings.append(dict(check='WrongAddress', ports=sorted(set(h['port'] for h in ev['wrong_address'])),
                                 msg='listening on the wrong address: %s, expected %s; VLLM_HOST_IP of the service is '
                                     'wrong or unset (vLLM auto-detects the default-route IP); export '
                                     'VLLM_HOST_IP=%s in its environment' % (
                                         '; '.join(describe_holder(h) for h in ev['wrong_address']),
                                         host_ip, host_ip)))
        if findings:
            result['findings'] = findings
            module.fail_json(msg=summarize(findings, 'kv_port group %s on %s is not owned by vLLM' % (
                span(ports), host_ip)), **result)
        if not ev['closed']:
            result['findings'] = []
            misleading_warning(module, ev['misleading'], host_ip)
            return
        if time.time() >= deadline:
            break
        time.sleep(POLL * 2)
    closed = ev['closed']
    extra = ''
    if ev['misleading']:
        extra = '; other listeners on those ports: %s' % '; '.join(describe_holder(h) for h in ev['misleading'])
    f = dict(check='PortClosed', ports=closed,
             msg='port(s) %s of the group do not listen on %s after %ds (%d of %d up)%s; check the service log for '
                 '"KVCacheSendingThread" errors, the tp/pp/pcp/dp sizes given here, and VLLM_HOST_IP' % (
                     span(closed), host_ip, params['timeout'], len(ports) - len(closed), len(ports), extra))
    result['findings'] = [f]
    module.fail_json(msg=summarize([f], 'kv_port group %s is not fully listening' % span(ports)), **result)


def run_reachable(module, params, ports, result):
    # only this state probes; its thread pool import is not paid by free/listening
    from ansible_collections.vllm_pd.ascend.plugins.module_utils.zmtp import REMEDY, probe_many

    host = params['remote_host'] or params['host_ip']
    if not host:
        module.fail_json(msg='state=reachable needs remote_host (the prefill host VLLM_HOST_IP) or host_ip', **result)
    result['host_ip'] = host
    deadline = time.time() + params['timeout']
    results = dict((p, None) for p in ports)
    todo = list(ports)
    while True:
        for r in probe_many(host, todo, timeout=params['probe_timeout']):
            results[r['port']] = r
        todo = [p for p in ports if results[p]['result'] != 'zmq']
        if not todo or time.time() >= deadline:
            break
        time.sleep(1)
    result['probes'] = [results[p] for p in ports]
    if todo:
        lines = ['%s %s (%s; %s)' % (format_endpoint(host, p), results[p]['result'], results[p]['detail'],
                                     REMEDY.get(results[p]['result'], '')) for p in todo]
        f = dict(check='NotReachable', ports=todo, msg='%d of %d port(s) give no ZMTP greeting: %s' % (
            len(todo), len(ports), '; '.join(lines)))
        result['findings'] = [f]
        module.fail_json(msg=summarize([f], 'kv_port group %s on %s is not reachable as ZeroMQ' % (span(ports), host)),
                         **result)
    result['findings'] = []


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
    p = module.params
    result = dict(changed=False, findings=[], ports=[])
    try:
        ports = port_group(p['kv_port'], p['tp_size'], p['pp_size'], p['pcp_size'], p['dp_rank_start'],
                           p['dp_size_local'])
    except ValueError as e:
        module.fail_json(msg='invalid parallel sizes: %s' % e, **result)
    result['ports'] = ports
    p = dict(p)
    if p['timeout'] is None:
        p['timeout'] = DEFAULT_TIMEOUTS[p['state']]
    if p['timeout'] < 0:
        module.fail_json(msg='timeout must be >= 0', **result)
    host_ip = p['host_ip']
    if host_ip is not None:
        norm = normalize_ip(host_ip)
        try:
            socket.inet_pton(socket.AF_INET6 if ':' in norm else socket.AF_INET, norm)
        except (socket.error, ValueError):
            module.fail_json(msg='host_ip %r is not an IP address; VLLM_HOST_IP must be the literal inter-node IP '
                                 'of the host' % host_ip, **result)
        host_ip = norm
    ops = HostOps(module)
    if p['state'] == 'reachable':
        run_reachable(module, p, ports, result)
        module.exit_json(**result)
    if host_ip is None:
        host_ip = '0.0.0.0'
        module.warn('host_ip not given: checking the group against every address (wildcard)')
    result['host_ip'] = host_ip
    if p['state'] == 'free':
        run_free(module, ops, p, ports, host_ip, result)
    else:
        run_listening(module, ops, p, ports, host_ip, result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
