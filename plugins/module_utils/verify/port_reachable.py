# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kv_port_group state=reachable: from a decode host, every port of the prefill group answers with a ZMTP
greeting (zmtp.py probes them in parallel); names the ports that are refused, time out or speak HTTP."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import time

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_free import summarize
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import span
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.sockets import format_endpoint


def run_reachable(module, params, ports, result):
    # imported here: the thread pool import is not paid by free/listening
    from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.zmtp import REMEDY, probe_many

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
