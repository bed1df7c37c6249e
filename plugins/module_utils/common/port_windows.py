# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The port windows the Ascend transports of an engine bind from, decided by the engine's environment.

One function (reserved_windows) for every stage that needs them: the inventory rules (monitoring ports,
window variables), the preflight (filter pd_port_windows), the start guard and the doctor. Pure.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime

DEFAULT_ASCEND_BASE_PORT = 20000
# vLLM-Ascend doc table width (Mooncake v0.3.7 used dev_id*1000); newer
# Mooncake uses 100 per device, so 1000 is the conservative upper bound.
ADXL_PORTS_PER_NPU = 1000
DEFAULT_NPU_COUNT = 8
TE_RPC_RANGE = (15000, 17000)
HCCL_RANGE = (60000, 60031)
# HCCL takes HCCL_IF_BASE_PORT and the next ports: 16 on older CANN, 32 on newer (vllm-ascend PD doc).
HCCL_PORTS = 32
# The engine environment variables that move a window: the release table's window_env (the same in every release
# it knows; Mooncake reads MC_*_RPC_PORT, v0.3.9 only the misspelled MC_*_PRC_PORT, so both are honoured, the
# correct spelling first).
_ENV = runtime(None)['window_env']
WINDOW_ENV = ((_ENV['adxl_base'],) + _ENV['te_rpc_min'][:1] + _ENV['te_rpc_max'][:1] + _ENV['te_rpc_min'][1:]
              + _ENV['te_rpc_max'][1:] + (_ENV['hccl_base'],))


def adxl_window(base_port, npu_count, ports_per_npu=ADXL_PORTS_PER_NPU):
    """Inclusive (lo, hi) of the AscendDirectTransport window, or None if empty."""
    if npu_count <= 0:
        return None
    return base_port, base_port + ports_per_npu * npu_count - 1


def _env_port(env, names, default):
    """(value, name) of the first of NAMES set in ENV, else (DEFAULT, None); ValueError naming it if not a port."""
    for name in names:
        raw = env.get(name)
        if raw is None or str(raw).strip() == '':
            continue
        text = str(raw).strip()
        if not text.isdigit() or not 1 <= int(text) <= 65535:
            raise ValueError('%s=%s in the engine environment is not a port 1-65535' % (name, raw))
        return int(text), name
    return default, None


def reserved_windows(env=None, npu_count=DEFAULT_NPU_COUNT):
    """Every window of ports the Ascend transports bind from, as the engine process with environment ENV sees it.

    The one place that decides them: the preflight, the start guard, the doctor and the monitoring-port check
    all call it with the engine environment of the host (vllm_pd_engine_env / prefill_env / decode_env, or the
    running engine's environment).

    - adxl: AscendDirectTransport, ASCEND_BASE_PORT (default 20000) + ADXL_PORTS_PER_NPU per NPU (None
      when npu_count is 0);
    - te_rpc: the Mooncake Transfer Engine RPC range MC_MIN_RPC_PORT-MC_MAX_RPC_PORT (default 15000-17000);
    - hccl: HCCL_IF_BASE_PORT (default 60000) and the next HCCL_PORTS - 1 ports.

    Returns {'ascend_base_port', 'adxl', 'te_rpc', 'hccl', 'moved'}: windows as (lo, hi); moved lists the
    variables that were set. ValueError names the variable whose value is not a port or gives an empty range.
    """
    env = env or {}
    base, b_name = _env_port(env, (_ENV['adxl_base'],), DEFAULT_ASCEND_BASE_PORT)
    te_lo, lo_name = _env_port(env, _ENV['te_rpc_min'], TE_RPC_RANGE[0])
    te_hi, hi_name = _env_port(env, _ENV['te_rpc_max'], TE_RPC_RANGE[1])
    if te_hi < te_lo:
        raise ValueError('%s=%d is below %s=%d in the engine environment: the Transfer Engine RPC range is empty'
                         % (hi_name or _ENV['te_rpc_max'][0] + ' (default)', te_hi,
                            lo_name or _ENV['te_rpc_min'][0] + ' (default)', te_lo))
    hccl, h_name = _env_port(env, (_ENV['hccl_base'],), HCCL_RANGE[0])
    if hccl + HCCL_PORTS - 1 > 65535:
        raise ValueError('%s=%d in the engine environment leaves no room for the %d ports HCCL takes '
                         '(at most %d)' % (_ENV['hccl_base'], hccl, HCCL_PORTS, 65536 - HCCL_PORTS))
    adxl = adxl_window(base, npu_count)
    if adxl and adxl[1] > 65535:
        adxl = (adxl[0], 65535)
    return dict(ascend_base_port=base, adxl=adxl, te_rpc=(te_lo, te_hi), hccl=(hccl, hccl + HCCL_PORTS - 1),
                moved=[n for n in (b_name, lo_name, hi_name, h_name) if n])


def merge_ranges(ranges):
    """Merge overlapping or adjacent (lo, hi) ranges."""
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def format_port_list(ranges):
    """A kernel port list of (lo, hi) ranges: [(80, 80), (90, 99)] -> '80,90-99'."""
    return ','.join(str(lo) if lo == hi else '%d-%d' % (lo, hi) for lo, hi in merge_ranges(ranges))


def ports_to_ranges(ports):
    return merge_ranges((p, p) for p in ports)


def span(ports):
    """Ports as a short range list, e.g. '28002-28009'."""
    return format_port_list(ports_to_ranges(ports))


def window_checks(adxl, te_rpc, hccl):
    """(check name, label, (lo, hi) or None, hint) of each window of reserved_windows: what the preflight's
    kv_port_group check and the inventory rule (rule_group_windows) say of a group port inside one, under the names
    vllm_pd_ignore_checks knows (check_names.py)."""
    return [('AdxlWindow', 'AscendDirectTransport (ADXL/RDMA) window', adxl,
             'Mooncake picks random listen ports there, so the bind fails intermittently with "Address '
             'already in use"; use kv_port >= %d' % ((adxl[1] + 1) if adxl else 0)),
            ('TeRpcRange', 'Mooncake Transfer Engine RPC range', te_rpc,
             'the Transfer Engine binds a random port there (MC_MIN_RPC_PORT/MC_MAX_RPC_PORT); move kv_port'),
            ('HcclRange', 'HCCL port range (HCCL_IF_BASE_PORT)', hccl, 'move kv_port or HCCL_IF_BASE_PORT')]


def window_overlaps(ports, windows):
    """[{check, ports, window, msg}] of the PORTS of a group that lie inside one of WINDOWS (window_checks)."""
    findings = []
    for check, label, window, hint in windows:
        hit = [p for p in ports if window and window[0] <= p <= window[1]]
        if hit:
            findings.append(dict(check=check, ports=hit, window=list(window),
                                 msg='port(s) %s of the group overlap the %s %d-%d; %s' % (
                                     span(hit), label, window[0], window[1], hint)))
    return findings
