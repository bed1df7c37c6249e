# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.verdict import verdict


def test_nothing_to_say_is_ok_and_shows_nothing():
    assert verdict([], []) == {'changed': False}
    assert verdict('', None) == {'changed': False}


def test_what_to_show_is_shown_as_debug_shows_it():
    shown = {'changed': False, 'msg': ['WARNING a', 'WARNING b'], '_ansible_verbose_always': True}
    assert verdict(['WARNING a', 'WARNING b'], []) == shown


def test_a_refusal_fails_and_keeps_what_there_was_to_show():
    assert verdict([], 'refused') == {'changed': False, 'failed': True, 'msg': 'refused'}
    refused = {'changed': False, 'failed': True, 'msg': ['refused', 'too'], 'shown': 'WARNING a'}
    assert verdict('WARNING a', ['refused', 'too']) == refused
