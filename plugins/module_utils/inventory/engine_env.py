# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine environment that depends on the installed vllm-ascend, and the transfer-timeout rule.

Abort timeout (how long P keeps the KV blocks of a request D never pulled): the Mooncake connector
reads VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT from v0.18.0 on, and VLLM_NIXL_ABORT_REQUEST_TIMEOUT in
every release before it, v0.18.0rc1 included (vllm-ascend #7140, fixed by PR #8617; read in
vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py of tags v0.18.0rc1 and v0.18.0).
Setting only the other name leaves P on the 480 s default.

Transfer timeout (Mooncake docs/source/design/transfer-engine/ascend_direct_transport.md, "Detailed
Descriptions"): one RDMA retransmission waits 4.096 us * 2^HCCL_RDMA_TIMEOUT, HCCL_RDMA_RETRY_CNT
times; ASCEND_TRANSFER_TIMEOUT (ms) should be slightly larger than their product, or a transfer is
abandoned while the NIC still retries. vllm-ascend derives ASCEND_TRANSFER_TIMEOUT itself (product
+ 3000 ms, defaults 20 and 7) unless it is given (vllm_ascend/distributed/kv_transfer/utils/utils.py
get_transfer_timeout_value), so only a given value can break the rule.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import releases

# The first release whose Mooncake connector reads ABORT_MOONCAKE (a final release: its rc1 did not).
FIRST_MOONCAKE_ABORT = releases.parse_version('0.18.0')
# The two abort-timeout names, from the table (abort_env): the one of its releases from FIRST_MOONCAKE_ABORT on,
# and the one of those before it.
_ABORT = dict((releases.parse_version(version) >= FIRST_MOONCAKE_ABORT, entry['abort_env'])
              for version, entry in sorted(releases.RELEASES.items()))
ABORT_MOONCAKE = _ABORT[True]
ABORT_NIXL = _ABORT[False]
# The transfer-timeout rule's variables (the table's transfer_timeout_env: the same in every release).
_TRANSFER_ENV = releases.runtime(None)['transfer_timeout_env']
TRANSFER_TIMEOUT_ENV = _TRANSFER_ENV['transfer']
RDMA_TIMEOUT_ENV = _TRANSFER_ENV['rdma_timeout']
RDMA_RETRY_CNT_ENV = _TRANSFER_ENV['rdma_retry']

# vllm-ascend's defaults when the variables are not set (utils.py get_transfer_timeout_value).
RDMA_TIMEOUT_DEFAULT = 20
RDMA_RETRY_CNT_DEFAULT = 7
TRANSFER_TIMEOUT_SHORT = 'TransferTimeoutShort'


def abort_timeout_names(version):
    """The abort-timeout variable(s) to set for VERSION (None or '' = unknown: both, so either release
    reads it). A release of the table (releases.RELEASES abort_env) gets the name its connector reads;
    another one (refused by the preflight unless UnsupportedRelease is ignored) the name by the rule above."""
    if version is None or str(version).strip() == '':
        return [ABORT_MOONCAKE, ABORT_NIXL]
    try:
        named = releases.abort_env(version)
    except ValueError:
        named = None  # parse_version names it below
    if named:
        return [named]
    return [ABORT_MOONCAKE] if releases.parse_version(version) >= FIRST_MOONCAKE_ABORT else [ABORT_NIXL]


def _whole(env, key, default):
    value = env.get(key)
    if value is None or str(value).strip() == '':
        return default, False
    try:
        return int(str(value).strip()), True
    except ValueError:
        raise ValueError('%s=%r is not a whole number' % (key, value))


def retransmit_budget_ms(rdma_timeout, retry_cnt):
    """How long the NIC keeps retrying one packet: 4.096 us * 2^HCCL_RDMA_TIMEOUT * HCCL_RDMA_RETRY_CNT, in ms."""
    return 4.096 * (2 ** rdma_timeout) * retry_cnt / 1000.0


def transfer_timeout_problem(env):
    """A sentence when ENV (the engine environment from the inventory) breaks the Mooncake rule, else None."""
    env = env or {}
    try:
        timeout, timeout_set = _whole(env, TRANSFER_TIMEOUT_ENV, None)
        rdma, rdma_set = _whole(env, RDMA_TIMEOUT_ENV, RDMA_TIMEOUT_DEFAULT)
        retry, retry_set = _whole(env, RDMA_RETRY_CNT_ENV, RDMA_RETRY_CNT_DEFAULT)
    except ValueError as exc:
        return '%s, so the transfer timeout cannot be checked' % exc
    if not timeout_set:
        return None  # vllm-ascend derives it from the other two with a 3000 ms margin
    budget = retransmit_budget_ms(rdma, retry)
    if timeout > budget:
        return None
    return ('%s=%d ms is not above the RDMA retransmission budget 4.096 us * 2^%d * %d = %d ms '
            '(%s %s, %s %s): a transfer is abandoned while the NIC still retries '
            '(Mooncake ascend_direct_transport docs: set it slightly larger than the budget)' % (
                TRANSFER_TIMEOUT_ENV, timeout, rdma, retry, int(budget), RDMA_TIMEOUT_ENV,
                rdma if rdma_set else 'unset, %d' % rdma, RDMA_RETRY_CNT_ENV, retry if retry_set else 'unset, %d' % retry))


def transfer_timeout_findings(engines):
    """Warnings (not refusals): one per distinct environment that breaks the rule, naming the hosts."""
    by_problem = {}
    for e in engines:
        problem = transfer_timeout_problem(e.get('env'))
        if problem:
            by_problem.setdefault(problem, []).append('%s %s' % (e['kind'], e['host']))
    return [{'name': TRANSFER_TIMEOUT_SHORT, 'warning': True, 'hosts': sorted(set(h.split(' ', 1)[1] for h in where)),
             'message': '[%s] %s: %s. Fix: raise %s above the budget or drop it from '
                        'vllm_pd_engine_env (vllm-ascend then derives it with a 3000 ms margin)' % (
                            TRANSFER_TIMEOUT_SHORT, ', '.join(where), problem, TRANSFER_TIMEOUT_ENV)}
            for problem, where in sorted(by_problem.items())]
