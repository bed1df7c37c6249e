# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proxy membership: what the proxy lists now vs what the inventory wants (issue 21).

vllm-ascend's example proxy (v0.13.0+) answers POST /instances/add and /instances/remove with
{"message", "current_prefill_instances": ["host:port"], "current_decode_instances": [...]} (shared docs
day2-ops.md §1a); an add of no instance changes nothing and returns the lists. Upstream folds
localhost and 127.0.0.1 into 0.0.0.0 when it compares members, so do we.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime

ROLES = ('prefill', 'decode')
# the key of each role's members in the answer, and of a refusal (the release table's proxy_admin_answer and
# proxy_admin_error, the same in every release with the admin API)
ANSWER_KEYS = runtime(None)['proxy_admin_answer']
ERROR_KEY = runtime(None)['proxy_admin_error']


def member_key(member):
    host, _sep, port = str(member).rpartition(':')
    for loopback in ('localhost', '127.0.0.1'):
        host = host.replace(loopback, '0.0.0.0')
    return '%s:%d' % (host, int(port))


def live_members(answer):
    """The member lists of an /instances/* answer, {prefill: [...], decode: [...]}; ValueError when the
    answer is not one (an error body, or a proxy without the admin API)."""
    if not isinstance(answer, dict) or ERROR_KEY in answer or any(
            not isinstance(answer.get(ANSWER_KEYS[r]), list) for r in ROLES):
        raise ValueError('not an /instances answer of the example proxy: %r' % (answer,))
    return dict((r, [str(m) for m in answer[ANSWER_KEYS[r]]]) for r in ROLES)


def plan(live, desired, keep=()):
    """live, desired: {role: ['host:port', ...]} -> {add: {role: [...]}, remove: {role: [...]}, changed}.
    Order follows the desired list (adds) and the live list (removes). KEEP: members that stay when listed
    (those no inventory host explains, unless the operator allowed their removal)."""
    out = {'add': {}, 'remove': {}}
    kept = set(member_key(m) for m in keep)
    for r in ROLES:
        have = set(member_key(m) for m in live.get(r, []))
        want = set(member_key(m) for m in desired.get(r, [])) | kept
        out['add'][r] = [m for m in desired.get(r, []) if member_key(m) not in have]
        out['remove'][r] = [m for m in live.get(r, []) if member_key(m) not in want]
    out['changed'] = any(out['add'][r] or out['remove'][r] for r in ROLES)
    return out


def _after(words, flag):
    out = []
    if flag in words:
        for word in words[words.index(flag) + 1:]:
            if word.startswith('--'):
                break
            out.append(word)
    return out


def unit_members(words):
    """The members a proxy command line names (--prefiller-hosts/-ports, --decoder-hosts/-ports), as
    live_members gives them: what a proxy without the admin API serves, since it cannot change them."""
    words = [str(w) for w in words]
    return dict((r, ['%s:%s' % hp for hp in zip(_after(words, '--%ser-hosts' % f), _after(words, '--%ser-ports' % f))])
                for r, f in (('prefill', 'prefill'), ('decode', 'decod')))


def doctor_view(live, desired, retiring):
    """Members as the proxy sees them vs the inventory: missing (the inventory wants, the proxy lacks),
    extra (listed, the inventory does not know them) and draining (listed, their host is being retired)."""
    p = plan(live, desired)
    gone = set(member_key(m) for m in retiring)
    return {'missing': p['add'],
            'extra': dict((r, [m for m in p['remove'][r] if member_key(m) not in gone]) for r in ROLES),
            'draining': dict((r, [m for m in p['remove'][r] if member_key(m) in gone]) for r in ROLES)}


def unexplained(live, known_addresses):
    """The members (live, {role: ['host:port', ...]}) whose address is no address of an inventory host of the
    cluster (KNOWN_ADDRESSES): a host deleted from the inventory, an instance added by hand. The collection
    cannot visit them; OrphanInstance names them."""
    known = set(member_key('%s:0' % a).rpartition(':')[0] for a in known_addresses if a)
    return dict((r, [m for m in live.get(r, []) if member_key(m).rpartition(':')[0] not in known]) for r in ROLES)
