# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_systemd_argv
short_description: An argv list as the value of a systemd ExecStart= line, that runs exactly that argv
version_added: "1.0.0"
description:
  - Shell quoting is not systemd quoting. Every word is double-quoted with C(\) and C(") backslash-escaped
    (systemd C-unescapes inside quotes), C(%) written as C(%%) (specifiers are expanded in every word)
    and C($) as C($$) (variables are substituted when the command runs), so a lone C(;) is no separator
    and C(/data/100%Zsure) or C($HOME) reach the process unchanged (systemd.service(5), systemd.syntax(7)).
  - A word with a control character (newline, CR, NUL, ...) cannot be written and is an error, as is
    an executable that starts with one of systemd's prefixes C(-@:+!) or holds C($).
options:
  _input:
    description: The command, executable first, one list element per argv word.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
# ExecStart={{ ['vllm', 'serve', '/data/100%Zsure', '--served-model-name', 'a b$c'] | vllm_pd.ascend.pd_systemd_argv }}
# -> ExecStart="vllm" "serve" "/data/100%%Zsure" "--served-model-name" "a b$$c"
"""

RETURN = r"""
_value:
  description: The words, quoted and escaped for ExecStart=, joined by spaces.
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.systemd_syntax import exec_line


def pd_systemd_argv(argv):
    try:
        return exec_line(argv)
    except ValueError as exc:
        raise AnsibleFilterError("pd_systemd_argv: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"pd_systemd_argv": pd_systemd_argv}
