# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_systemd_env
short_description: A mapping as the KEY=VALUE lines of a systemd EnvironmentFile=
version_added: "1.0.0"
description:
  - One line per variable, sorted by name. Names must match C([A-Za-z_][A-Za-z0-9_]*); values hold no
    control character but tab (a newline would add variables).
  - A value systemd would read back changed (a backslash, blanks at an end, a leading quote) is
    double-quoted with C(" \ ` $) backslash-escaped, the rules of systemd.exec(5) for EnvironmentFile=.
  - With O(literal), for a file also passed to C(podman/docker run --env-file) (which read values
    verbatim), such a value is an error instead.
options:
  _input:
    description: The variables.
    type: dict
    required: true
  literal:
    description: Refuse values that would need quoting.
    type: bool
    default: false
"""

EXAMPLES = r"""
# {{ {'HF_TOKEN': 'hf_x', 'PROMPT': ' a "b" '} | vllm_pd.ascend.pd_systemd_env }}
# -> HF_TOKEN=hf_x
#    PROMPT=" a \"b\" "
"""

RETURN = r"""
_value:
  description: The lines, joined by newlines (no trailing newline); empty for an empty mapping.
  type: str
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.systemd_syntax import env_lines


def pd_systemd_env(env, literal=False):
    if isinstance(env, Mapping):
        env = dict(env)
    try:
        return "\n".join(env_lines(env, bool(literal)))
    except ValueError as exc:
        raise AnsibleFilterError("pd_systemd_env: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"pd_systemd_env": pd_systemd_env}
