# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_release_targets
short_description: The commands that read the release in the Python of each engine kind of a host
version_added: "1.1.0"
description:
  - One read per distinct vllm binary (and container engine and image for the container runtime), the engine
    kinds that share it listed together (P and D of one host usually do).
  - The systemd runtime runs the script with C(sh) on the host; the container runtime runs it in the engine
    image (C(ENGINE run --rm --net=none --entrypoint sh IMAGE)).
options:
  _input:
    description:
      - The engine kinds of the host, in order, with their resolved settings C({kind, binary, runtime,
        container_engine, container_image}).
      - An empty item (a kind the host does not run) is skipped.
    type: list
    elements: dict
    required: true
  script:
    description: The text of the shell script that reads the release (its first argument is the binary).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Read the releases
  ansible.builtin.command:
    argv: "{{ item.argv }}"
  loop: "{{ [{'kind': 'prefill', 'binary': 'vllm', 'runtime': 'systemd', 'container_engine': 'podman', 'container_image': ''}]
    | vllm_pd.ascend.pd_release_targets(script=lookup('ansible.builtin.file', 'release_read.sh')) }}"
"""

RETURN = r"""
_value:
  description: One item per distinct read.
  type: list
  elements: dict
  contains:
    key:
      description: The binary, or C(ENGINE IMAGE BINARY) for the container runtime.
      type: str
    kinds:
      description: The engine kinds it reads for.
      type: list
      elements: str
    argv:
      description: The command.
      type: list
      elements: str
"""

from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.release_read import read_targets


def pd_release_targets(kinds, script):
    return read_targets([k for k in kinds or [] if k], script)


class FilterModule(object):
    def filters(self):
        return {"pd_release_targets": pd_release_targets}
