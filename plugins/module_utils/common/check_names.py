# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every named check of the preflight and the benchmark gate, in one place: what it means and its fix.

vllm_pd_ignore_checks names checks from here; each becomes a warning instead of a stop (kubeadm's
--ignore-preflight-errors). The README tables list the same names (tests/unit checks they agree).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

# name: (where, what it means, fix)
CHECKS = {
    # inventory validation (roles/preflight/templates/inventory_errors.j2)
    'InventoryInvalid': ('inventory', 'an inventory variable cannot describe a deployment',
                         'correct the variable the message names'),
    'MonitoringPortCollision': ('inventory', 'a port of vllm_pd_monitoring_ports (Grafana, Prometheus, exporters) lies in '
                                'a kv_port group, on an API/proxy port or in a reserved window',
                                'move the monitoring service or the PD port, and list its port'),
    # container runtime (roles/preflight/tasks/host.yml)
    'ContainerEngineMissing': ('host', 'vllm_pd_container_engine is not installed',
                               'install it or set vllm_pd_container_engine'),
    'ContainerImageMissing': ('host', 'the engine image is not on the host', 'load or pull vllm_pd_container_image'),
    # kv_port_group state=free
    'PortRange': ('kv_port_group', 'a group port is outside 1024-65535', 'pick another vllm_pd_kv_port'),
    'AdxlWindow': ('kv_port_group', 'the group overlaps the ADXL listen window', 'kv_port >= 28000 (8 NPUs) / 36000 (16)'),
    'TeRpcRange': ('kv_port_group', 'the group overlaps the Transfer Engine RPC range', 'move kv_port'),
    'HcclRange': ('kv_port_group', 'the group overlaps the HCCL port range', 'move kv_port or HCCL_IF_BASE_PORT'),
    'ReservedPort': ('kv_port_group', 'the group holds an API or proxy port', 'move kv_port or the API/proxy port'),
    'EphemeralRange': ('kv_port_group', 'the group lies in the kernel ephemeral range',
                       'reserve the ports (vllm_pd_reserve_ephemeral) or move kv_port'),
    'PortBusy': ('kv_port_group', 'another process holds a group port',
                 'stop it, or allow it in vllm_pd_stop_services'),
    'HostIp': ('kv_port_group', 'VLLM_HOST_IP is not an address of the host', 'correct vllm_pd_address / vllm_pd_network'),
    'ApiPortInUse': ('host', 'an engine API port is in use', 'stop the other server or change prefill/decode_api_port'),
    'ProxyPortInUse': ('host', 'the proxy port is in use', 'stop the other server or change vllm_pd_proxy_port'),
    # NPU layer (npu_readiness)
    'NpuToolsMissing': ('npu', 'hccn_tool or npu-smi is not on the host', 'install the Ascend driver tools'),
    'NpuToolFailed': ('npu', 'an NPU tool failed or printed an unknown format', 'run the command by hand'),
    'NpuLinkDown': ('npu', 'the NPU NIC link is DOWN', 'check cable/switch port; hccn_tool -i N -link -g'),
    'NpuNetUnhealthy': ('npu', 'net_health is not Success', 'fix netdetect/gateway; hccn_tool -i N -net_health -g'),
    'HccnConfMissing': ('npu', '/etc/hccn.conf has no address_N for the NPU', 'configure the NPU IP (hccn_tool -i N -ip -s)'),
    'HccnConfMismatch': ('npu', 'the NPU IP/netmask differs from /etc/hccn.conf', 'make hccn.conf and the NPU agree'),
    'TlsMismatch': ('cluster', 'TLS switch differs across NPUs/hosts', 'hccn_tool -i N -tls -s enable 0 on every NPU'),
    'NpuUnreachable': ('cluster', 'a P NPU cannot ping a D NPU', 'fix the RoCE path (VLAN, switch, routes)'),
    'NpuBusy': ('npu', 'another process uses an instance NPU', 'stop it or give the instance other NPUs'),
    'NpuUnhealthy': ('npu', 'npu-smi Health is not OK', 'npu-smi info -t health; replace or reset the NPU'),
    'VersionMismatch': ('cluster', 'driver or CANN versions differ across the cluster', 'install one version everywhere'),
    'VersionUnreadable': ('npu', 'driver or CANN version file missing', 'reinstall the driver / CANN toolkit'),
    'CannIncompatible': ('npu', 'CANN does not match vllm_pd_vllm_ascend_version', 'install the CANN of the table'),
    'ContainerMountMissing': ('npu', 'the engine container would not see hccn.conf or hccn_tool',
                              'mount them (vllm_pd_container_run_options)'),
    'ShmTooSmall': ('npu', 'the engine container keeps a small /dev/shm', 'add --shm-size to the run options'),
    'MemlockLimited': ('npu', 'the engine container has a memlock limit', 'add --ulimit memlock=-1 to the run options'),
    # the vllm-ascend release installed in each engine's Python (releases.installed_findings, preflight phase 1)
    'UnsupportedRelease': ('cluster', 'an engine host runs a vllm-ascend release the collection refuses or does not know, '
                           'or a vLLM that release is not built for', 'install a supported release (README table)'),
    'ReleaseMismatch': ('cluster', 'P and D run different vllm-ascend releases, or vllm_pd_vllm_ascend_version names '
                        'another release than the hosts run', 'install one release on every engine host'),
    # P and D that fit together (pd_consistency, preflight phase 1)
    'ModelMismatch': ('cluster', 'the model files (config.json, tokenizer) differ between engine hosts',
                      'put the same model revision on every host of the cluster'),
    'ServedModelNameMismatch': ('cluster', 'P and D serve different model names', 'set one vllm_pd_served_model_name'),
    'DtypeMismatch': ('cluster', 'P and D run different --dtype', 'set one vllm_pd_dtype'),
    'KvCacheDtypeMismatch': ('cluster', 'P and D store the KV cache in different dtypes', 'set one vllm_pd_kv_cache_dtype'),
    'BlockSizeMismatch': ('cluster', 'P and D use different --block-size', 'set one vllm_pd_block_size'),
    'MaxModelLenMismatch': ('cluster', 'D cannot hold the context P accepts', 'give D a max_model_len >= P'),
    'QuantizationMismatch': ('cluster', 'P and D quantize differently', 'set one vllm_pd_quantization'),
    'SpecDecodeMismatch': ('cluster', 'speculative decoding on one side only or different',
                           'set one vllm_pd_speculative_config'),
    'TpNotMultiple': ('cluster', "P's tp is not a multiple of D's tp", 'change vllm_pd_prefill_tp_size/decode_tp_size'),
    'IntraRoceMissing': ('cluster', 'P and D share a host without HCCL_INTRA_ROCE_ENABLE=1',
                         'set HCCL_INTRA_ROCE_ENABLE: "1" in vllm_pd_engine_env'),
    'EngineEnvMismatch': ('cluster', 'an engine variable that must match differs across the cluster',
                          'give it one value in group_vars'),
    # the benchmark gate (playbooks/benchmark.yml, module_utils/bench_gate.py)
    'BenchRequestsFailed': ('benchmark', 'requests of the benchmark failed through the proxy',
                            'read the errors, run doctor.yml for the cluster'),
    'BenchTtftAboveSlo': ('benchmark', 'p99 TTFT is above vllm_pd_slo_ttft_ms', 'find what is slow or raise the SLO'),
    'BenchTpotAboveSlo': ('benchmark', 'p99 TPOT is above vllm_pd_slo_tpot_ms', 'find what is slow or raise the SLO'),
    'BenchThroughputBelowBaseline': ('benchmark', 'output throughput is below the baseline x vllm_pd_baseline_tolerance',
                                     'compare with the baseline run; save a new baseline after a deliberate change'),
    'BenchKvTransferSlow': ('benchmark', "a P->D pair's p99 KV transfer time is above vllm_pd_slo_kv_transfer_ms",
                            'check the RoCE path and NICs of the pair named'),
    'BenchKvTransferUnseen': ('benchmark', 'a decode host logged no KV transfer line during the run',
                              'keep the decode engines at log level INFO or unset vllm_pd_slo_kv_transfer_ms'),
    # a warning only (the deploy goes on); ignoring it silences it
    'TransferTimeoutShort': ('cluster', 'ASCEND_TRANSFER_TIMEOUT is not above 4.096 us * 2^HCCL_RDMA_TIMEOUT * '
                             'HCCL_RDMA_RETRY_CNT', 'raise it, or drop it so vllm-ascend derives it'),
    # day-2 operations (issue 21): a change of the running fleet stops here, nothing more is changed
    'ProxyMemberNotAdded': ('proxy', 'the proxy did not list an added instance (its /v1/models probe failed)',
                            'make /v1/models answer from the proxy host, or raise proxy_member_wait'),
    'ChangeNotRollable': ('cluster', 'the change alters what P and D must share on a running cluster',
                          'keep the running values, or set vllm_pd_allow_downtime: true for a stop-the-cluster change'),
    'OrphanInstance': ('host', 'a vllm_pd unit on the host that no inventory entry explains (a warning only)',
                       'add the host back to its group, or set vllm_pd_remove_orphans: true to remove it'),
    'DrainTimeout': ('proxy', 'an instance out of the proxy still had requests in flight at the deadline',
                     'run again at lower traffic, raise vllm_pd_drain_timeout, or set vllm_pd_allow_downtime'),
    # rolling change (vllm_pd_rollout=rolling): a failed batch stays out of the proxy, the rest serve
    'RollingNotPossible': ('cluster', 'a rolling change needs the admin API of the proxy and two hosts of each role',
                           'use the example proxy, add a host of the role, or deploy without vllm_pd_rollout=rolling'),
    'PairProofFailed': ('host', 'a restarted instance failed a request with a peer of the other role',
                        'read the transfer error in the journals of both engines, fix it, run again'),
    'ProxyRejoinTimeout': ('host', 'a restarted instance was not back in the proxy at the deadline',
                           'run again, raise vllm_pd_rejoin_timeout, or lower --waiting-retry-interval of the proxy'),
    # the example proxy cannot change its members any more; only a new process clears it
    'ProxyCountLeaked': ('proxy', 'the proxy counts requests in flight that no member has (a client gone while P '
                         'computed, 0.23): an isolated member would never be dropped',
                         'run again with -e vllm_pd_proxy_recover=restart, or restart the proxy at a quiet moment'),
    'ProxyListenerDead': ('proxy', 'the proxy never admits an added member that answers /v1/models: its listener '
                          'thread died (a remove of a member still waiting to be admitted)',
                          'run again with -e vllm_pd_proxy_recover=restart, or restart the proxy at a quiet moment'),
    'ProxyPythonUnfit': ('proxy', 'proxy_python cannot run the example proxy of the release (a missing import or an '
                         'older Python than the release needs)', 'install what the message names into proxy_python, '
                         'or point proxy_python at an interpreter that has it'),
    # the proxy tier (vllm_pd_proxy_front: haproxy) cannot run without its HAProxy
    'ProxyFrontMissing': ('proxy', 'the proxy tier is asked for (vllm_pd_proxy_front: haproxy) but the HAProxy binary '
                          '(proxy_front_binary) is not on the proxy host', 'install the distribution\'s haproxy package '
                          '(roles/proxy/README.md for an air-gapped host), or set vllm_pd_proxy_front: none'),
}
# A deployment cannot even be rendered past these; a change of the running fleet cannot skip its waits.
NOT_IGNORABLE = ('InventoryInvalid', 'ProxyMemberNotAdded', 'DrainTimeout', 'ChangeNotRollable', 'RollingNotPossible',
                 'PairProofFailed', 'ProxyRejoinTimeout', 'ProxyCountLeaked', 'ProxyListenerDead', 'ProxyPythonUnfit',
                 'ProxyFrontMissing')


def unknown(names):
    """Names of vllm_pd_ignore_checks that are no check (or cannot be ignored)."""
    return [n for n in names or [] if n not in CHECKS or n in NOT_IGNORABLE]


def validate_ignore(names):
    """Error message for a bad vllm_pd_ignore_checks, or None."""
    if names is None:
        return None
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        return 'vllm_pd_ignore_checks must be a list of check names, got %r' % (names,)
    bad = unknown(names)
    if not bad:
        return None
    return ('vllm_pd_ignore_checks names %s, which %s. Valid names: %s' % (
        ', '.join(bad), 'cannot be ignored or are no check' if any(b in NOT_IGNORABLE for b in bad) else 'are no check',
        ', '.join(sorted(n for n in CHECKS if n not in NOT_IGNORABLE))))
