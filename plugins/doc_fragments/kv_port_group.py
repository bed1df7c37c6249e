# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type


class ModuleDocFragment(object):
    # The options of vllm_pd.ascend.kv_port_group, kept here so the module file stays a short entry point.
    DOCUMENTATION = r"""
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
      - Default V(20000). The module does not read its own environment; pass the engine environment's value
        (filter P(vllm_pd.ascend.pd_port_windows#filter), as the preflight does).
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
      - A stopped unit is kept from starting again while PD is deployed - disabled (C(systemctl disable), never
        masked) when its C(UnitFileState) was V(enabled) or V(enabled-runtime); the C(.socket) units that start
        it (C(TriggeredBy=)) are stopped and disabled first, otherwise systemd listens again and starts it on
        the next connection. When systemd itself holds the port for a C(.socket) unit, that socket (allowed by
        its own name or by the service it starts) is stopped and disabled, and so are the services it starts.
      - A stopped container whose restart policy is not V(no) gets C(ENGINE update --restart no) (docker;
        podman 5 and later). podman 4 cannot change it, and a warning says so.
      - What each had before is returned in RV(holders_off), for C(stop_pd.yml) to put back.
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
"""
