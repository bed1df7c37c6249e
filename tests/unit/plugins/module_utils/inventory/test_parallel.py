# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""parallel: pp and pcp of one side from the inventory variables and vLLM's own spellings in the extra args."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import parallel as PL


@pytest.mark.parametrize('args, want', [
    ([], {'pp': None, 'pcp': None}),
    (['--pipeline-parallel-size', '2'], {'pp': 2, 'pcp': None}),
    (['-pp', 4, '--max-model-len', '4096'], {'pp': 4, 'pcp': None}),
    (['--pipeline-parallel-size=3', '-pcp=2'], {'pp': 3, 'pcp': 2}),
    (['--prefill-context-parallel-size', '2', '-pp', '2', '-pp', '3'], {'pp': 3, 'pcp': 2}),  # the last one wins
    # not these: a value that only looks like the flag, and the decode context parallel size (not in the formula)
    (['--served-model-name', 'x-pp', '-dcp', '2', '--pipeline-parallel-size-x=2'], {'pp': None, 'pcp': None}),
])
def test_args_sizes_reads_every_spelling(args, want):
    assert PL.args_sizes(args) == want


@pytest.mark.parametrize('args, words', [
    (['-pp'], 'end with -pp but give no size'),
    (['--pipeline-parallel-size', 'two'], '--pipeline-parallel-size two, which is not a whole number'),
    (['-pcp=0'], '-pcp 0'),
])
def test_args_sizes_refuses_what_vllm_would(args, words):
    with pytest.raises(ValueError) as e:
        PL.args_sizes(args, 'prefill_extra_args')
    assert words in str(e.value) and 'prefill_extra_args' in str(e.value)


def test_side_sizes_variable_args_and_the_options_added():
    assert PL.side_sizes('prefill') == {'pp': 1, 'pcp': 1, 'args': []}
    assert PL.side_sizes('prefill', pp_size=2, pcp_size='1') == {
        'pp': 2, 'pcp': 1, 'args': ['--pipeline-parallel-size', '2']}
    assert PL.side_sizes('prefill', ['-pp', '2'], pp_size=2, pcp_size=2) == {
        'pp': 2, 'pcp': 2, 'args': ['--prefill-context-parallel-size', '2']}
    with pytest.raises(ValueError, match=r'vllm_pd_decode_pcp_size=3 but decode_extra_args pass '
                                         r'--prefill-context-parallel-size 2\. Fix'):
        PL.side_sizes('decode', ['-pcp', '2'], pcp_size=3)
    with pytest.raises(ValueError, match='vllm_pd_prefill_pp_size=0 is not a whole number'):
        PL.side_sizes('prefill', pp_size=0)


def test_release_problem_follows_the_release_table():
    assert PL.release_problem('prefill', 2, 2) is None  # newest release: both
    assert PL.release_problem('prefill', 2, 2, '0.23.0.post1') is None
    assert 'not both' in PL.release_problem('prefill', 2, 2, 'v0.18.0')
    assert PL.release_problem('prefill', 2, 1, '0.18.0') is None
    assert 'no pipeline or context parallel terms' in PL.release_problem('prefill', 1, 2, '0.11.0')
    assert 'decode pp size must be 1' in PL.release_problem('decode', 2, 1)
    assert PL.release_problem('decode', 1, 2) is None


def test_extra_config_problem():
    plan_p, plan_d = {'tp_size': 4, 'pp_size': 2}, {'tp_size': 4, 'pp_size': 1}
    assert PL.extra_config_problem({}, plan_p, plan_d) is None
    assert PL.extra_config_problem({'prefill': {'pp_size': 2, 'pp_layer_partition': '30,31'}}, plan_p, plan_d) is None
    assert 'prefill.pp_size=1 disagrees' in PL.extra_config_problem({'prefill': {'pp_size': 1}}, plan_p, plan_d)
    assert 'decode.tp_size=2 disagrees' in PL.extra_config_problem({'decode': {'tp_size': 2}}, plan_p, plan_d)
    assert '2 comma-separated' in PL.extra_config_problem({'prefill': {'pp_layer_partition': '61'}}, plan_p, plan_d)
    assert 'must be a mapping' in PL.extra_config_problem({'prefill': 3}, plan_p, plan_d)
