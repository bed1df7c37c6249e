# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pd_requests_served over what an ansible.builtin.uri loop registers."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_requests_served import pd_requests_served


def read(*counts, status=200):
    return dict(changed=False, results=[
        dict(status=status, content='vllm:request_success_total{finished_reason="length"} %s\n' % n,
             item=dict(unit='vllm-pd-decode.service')) for n in counts])


def test_the_count_between_two_loops():
    assert pd_requests_served(read(2.0, 5.0), read(6.0, 5.0)) == 4


def test_skipped_failed_or_missing_reads_are_unknown():
    assert pd_requests_served(dict(skipped=True, results=[]), read(1.0)) is None
    assert pd_requests_served({}, {}) is None
    assert pd_requests_served(read(1.0), read(3.0, status=-1)) is None
    assert pd_requests_served(read(1.0), dict(results=[dict(failed=True, msg='timed out', item={})])) is None
