# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pd_doctor_engines, pd_doctor_cluster, pd_doctor_hosts, pd_doctor_metrics: the filters hand hostvars, groups, the host and the play's
hosts to module_utils doctor_cluster (tested there) and are registered under their names."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.filter import pd_doctor_cluster, pd_doctor_engines, pd_doctor_hosts, pd_doctor_metrics

GROUPS = {'vllm_pd_prefill': ['p1'], 'vllm_pd_decode': ['d1']}
INSPECT = {'engines': [{'kind': 'prefill', 'advertised': {'address': '10.0.0.1'}, 'group': {'ports': [30000]}}]}
HOSTVARS = {'p1': {'vllm_pd_cluster': 'a', 'vllm_pd_address': {'address': '10.0.0.1'}, '__doctor_inspect': INSPECT},
            'd1': {'vllm_pd_cluster': 'a', 'vllm_pd_address': {'address': '10.0.0.11'}}}


def test_registered_under_their_names():
    for module, name in ((pd_doctor_engines, 'pd_doctor_engines'), (pd_doctor_cluster, 'pd_doctor_cluster'),
                         (pd_doctor_hosts, 'pd_doctor_hosts'), (pd_doctor_metrics, 'pd_doctor_metrics')):
        assert list(module.FilterModule().filters()) == [name]


def test_the_filters():
    assert pd_doctor_cluster.pd_doctor_cluster(HOSTVARS, GROUPS, 'p1', ['p1', 'd1']) == {
        'peers': [{'host': 'd1', 'address': '10.0.0.11'}],
        'targets': [{'host': 'p1', 'address': '10.0.0.1', 'ports': [30000], 'what': 'advertised'}]}  # used on D only
    assert pd_doctor_cluster.pd_doctor_cluster(HOSTVARS, GROUPS, 'd1', ['p1', 'd1']) == {
        'peers': [{'host': 'p1', 'address': '10.0.0.1'}],
        'targets': [{'host': 'p1', 'address': '10.0.0.1', 'ports': [30000], 'what': 'advertised'}]}
    assert pd_doctor_engines.pd_doctor_engines({'prefill': [], 'decode': [
        {'unit': 'u', 'env_file': 'e', 'api_port': 1, 'container': '', 'container_engine': 'podman'}]}) == [
        {'kind': 'decode', 'unit': 'u', 'env_file': 'e', 'api_port': 1, 'container': '', 'container_engine': 'podman'}]


def test_the_report_filters():
    hv = {'p1': dict(HOSTVARS['p1'], group_names=['vllm_pd_prefill']), 'd1': dict(HOSTVARS['d1'], group_names=['vllm_pd_decode'])}
    assert list(pd_doctor_hosts.pd_doctor_hosts(hv, ['p1', 'd1'])) == ['p1', 'd1']
    assert pd_doctor_metrics.pd_doctor_metrics([{'item': {'kind': 'prefill', 'unit': 'u'}, 'status': 200, 'content': 't'}]) == [
        {'kind': 'prefill', 'unit': 'u', 'url': None, 'text': 't', 'error': None}]
