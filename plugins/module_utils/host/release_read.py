# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the preflight reads the release installed in the Python of each engine kind of a host (roles/engine
release.yml, script files/release_read.sh): the commands, one per distinct binary and image. Pure function."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type


def read_targets(kinds, script):
    """What the preflight runs to read the release of each engine kind of a host: KINDS is [{kind, binary,
    runtime, container_engine, container_image}] (the kinds of the host, resolved settings), SCRIPT the
    release_read.sh text. One read per distinct binary (and engine and image for the container runtime):
    P and D of one host usually share it. -> [{key, kinds, argv}]."""
    out = []
    for k in kinds:
        binary = k['binary']
        container = k['runtime'] == 'container'
        prefix = [k['container_engine'], 'run', '--rm', '--net=none', '--entrypoint', 'sh', k['container_image']] \
            if container else ['sh']
        key = '%s %s %s' % (prefix[0], prefix[-1], binary) if container else binary
        same = [t for t in out if t['key'] == key]
        if same:
            same[0]['kinds'].append(k['kind'])
        else:
            out.append({'key': key, 'kinds': [k['kind']], 'argv': prefix + ['-c', script, 'sh', binary]})
    return out
