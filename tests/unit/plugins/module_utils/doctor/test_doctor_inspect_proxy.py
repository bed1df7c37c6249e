# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""doctor_inspect.inspect_proxy: the proxy's unit, and for the proxy tier HAProxy's view of each process, read only
while HAProxy runs."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_inspect import inspect_proxy


class Host(object):
    def __init__(self, state):
        self.state = state

    def unit_show(self, unit):
        return dict(ActiveState=self.state)


TIER = dict(front='running', error=None, processes=[dict(server='proxy1', status='UP')])


def test_the_tier_is_read_when_haproxy_runs_and_not_for_the_single_proxy_or_a_stopped_front():
    reads = []

    def read_tier():
        reads.append(1)
        return TIER
    front = dict(unit='vllm-pd-front.service', front=True)
    assert inspect_proxy(Host('active'), front, read_tier)['tier'] == TIER
    assert 'tier' not in inspect_proxy(Host('failed'), front, read_tier)
    assert 'tier' not in inspect_proxy(Host('active'), dict(unit='vllm-pd-proxy.service'), read_tier)
    assert reads == [1]
