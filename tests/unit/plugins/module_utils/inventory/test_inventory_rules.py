# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""inventory_rules as a pure function: the view contract, the findings' fields, and the extension
point (RULES) later cluster-wide checks plug into. The rules themselves are exercised end to end,
through ansible-playbook, by tests/unit/hostile/test_inventory_hostile.py and
tests/unit/roles/test_inventory_errors.py."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory import inventory_rules as ir

BASE = dict(vllm_pd_cluster='a', vllm_pd_network='10.0.0.0/24', vllm_pd_model='m', vllm_pd_kv_port=30000,
            vllm_pd_prefill_tp_size=2, vllm_pd_decode_tp_size=2)


def view(p=None, d=None, proxy=True, **groups):
    hosts = {'p1': dict(BASE, **(p or {})), 'd1': dict(BASE, **(d or {}))}
    g = {'vllm_pd_prefill': ['p1'], 'vllm_pd_decode': ['d1'], 'vllm_pd_proxy': ['p1'] if proxy else [],
         'cluster_a': ['p1', 'd1']}
    g.update(groups)
    return {'groups': g, 'hosts': hosts}


def test_a_healthy_cluster_has_no_finding():
    assert ir.inventory_errors(view()) == []


def test_a_finding_names_cluster_host_variable_and_fix():
    [f] = ir.inventory_errors(view(d=dict(vllm_pd_decode_kv_port='abc')))
    assert (f['cluster'], f['host'], f['variable']) == ('a', 'd1', 'vllm_pd_decode_kv_port')
    assert f['text'] == ('cluster a, host d1: vllm_pd_decode_kv_port=abc must be a positive integer. '
                         'Fix: write it as a whole number, e.g. vllm_pd_decode_kv_port: 8000')


def test_a_rule_is_a_function_of_the_view_appended_to_rules():
    def rule_same_model_path(v):
        for name, members in v.clusters.items():
            if len(set(v.get(h, 'vllm_pd_model') for h in members)) > 1:
                yield ir.Finding(name, '', 'vllm_pd_model', 'P and D load different models', 'set it once')
    data = view(d=dict(vllm_pd_model='other'))
    assert [f['message'] for f in ir.inventory_errors(data, rules=[rule_same_model_path])] == \
        ['P and D load different models']
    # the built-in list runs every rule once, in order, and a repeated text is reported once
    assert len(ir.RULES) == len(set(ir.RULES))
    twice = ir.inventory_errors(data, rules=[rule_same_model_path, rule_same_model_path])
    assert len(twice) == 1


def test_no_error_is_a_traceback_for_any_value_type():
    odd = [None, True, 1.5, -1, 'x', [], {}, [None], {'a': None}, ['\n'], object()]
    for var in ir.VARIABLES:
        for value in odd:
            ir.inventory_errors(view(p={var: value}, d={var: value}))


def test_a_variable_that_cannot_be_evaluated_is_named():
    data = view()
    data['broken'] = [['p1', 'vllm_pd_extra_args', "'x' is undefined"]]
    [f] = ir.inventory_errors(data)
    assert (f['host'], f['variable']) == ('p1', 'vllm_pd_extra_args') and 'cannot be evaluated' in f['message']


def test_whole_rollout_errors_have_cluster_star():
    errors = ir.inventory_errors({'groups': {}, 'hosts': {}, 'rollout': 'fast'})
    assert [e['cluster'] for e in errors] == ['*', '*']
    assert 'vllm_pd_rollout=fast is not one of parallel, serial, canary' in errors[1]['text']


@pytest.mark.parametrize('bad', ['18', 'latest', 'v0.x.0', '0.18.0-rc1x', '1!0.18.0', 'v', '0.18.0 beta'])
def test_a_vllm_ascend_version_that_is_no_release_is_refused_by_name(bad):
    """The inventory rule reads the version with the one parser (releases.parse_version): a single number such
    as 18 stays refused, as it was when engine_env had a parser of its own."""
    [f] = ir.inventory_errors(view(p=dict(vllm_pd_vllm_ascend_version=bad)))
    assert (f['host'], f['variable']) == ('p1', 'vllm_pd_vllm_ascend_version')
    assert f['text'] == ('cluster a, host p1: vllm_pd_vllm_ascend_version=%s is not a vllm-ascend release. '
                         'Fix: write it as the release tag, e.g. v0.23.0 or v0.18.0rc1' % bad)


@pytest.mark.parametrize('good', ['v0.23.0', '0.23.0.post1', 'v0.18.0rc1', '0.18', 'V0.18.0RC1', '0.18.0-rc1',
                                  '0.11.0rc1.dev12+g1234abc', '0.13.0a1'])
def test_every_pep440_spelling_of_a_release_passes_the_inventory_rule(good):
    assert ir.inventory_errors(view(p=dict(vllm_pd_vllm_ascend_version=good))) == []


def test_limit_without_the_hosts_a_targeted_role_needs_is_named_before_any_host_is_contacted():
    # the decode side proves every prefill port group; a prefill host outside --limit is not planned
    [f] = ir.inventory_errors(dict(view(), targeted=['d1']))
    assert (f['cluster'], f['host'], f['variable']) == ('a', 'd1', '--limit')
    assert f['message'].startswith('d1 is in this run (--limit) but p1 of its cluster is not; the decode side proves')
    assert f['fix'] == 'run on the whole cluster (--limit cluster_a), or add p1 to --limit'
    # the proxy (on p1) lists every engine: p1 alone leaves d1 out of its member list
    [f] = ir.inventory_errors(dict(view(), targeted=['p1']))
    assert f['host'] == 'p1' and 'but d1 of its cluster is not; the proxy lists every engine' in f['message']
    # the whole cluster, a prefill host without the proxy, or no limit at all: nothing to name
    for data in (dict(view(), targeted=['p1', 'd1']), dict(view(proxy=False), targeted=['p1']), dict(view(), targeted=None)):
        assert [f for f in ir.inventory_errors(data) if f['variable'] == '--limit'] == []
    # a prefill host being retired is neither probed nor listed, so it need not be in the run
    retiring = dict(view(p=dict(vllm_pd_state='absent')), targeted=['d1'])
    assert [f for f in ir.inventory_errors(retiring) if f['variable'] == '--limit'] == []
