# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reader of environment files: what systemd's EnvironmentFile= gives a unit.

The roles write the engine's and the proxy's env file (inventory/systemd_syntax.py env_lines: bare, or
double-quoted with '"', '\\', '`' and '$' backslash-escaped); the doctor, the API key lookups and the scripts
the roles run on hosts read them back here. The rules are systemd's own (systemd.exec(5) EnvironmentFile=,
src/basic/env-file.c parse_env_file_internal, then strv_env_clean in exec_context_load_environment):

- blank space before a name is skipped; a line whose first other character is '#' or ';' is a comment;
  a line without '=' is skipped;
- the name loses its trailing blanks; a name that is not [A-Za-z_][A-Za-z0-9_]* is dropped (so
  ``export NAME=value`` sets nothing: systemd reads the name 'export NAME');
- blanks before the value are skipped; an unquoted value keeps its inner blanks, loses its trailing ones,
  and '\\X' gives X ('\\' at the end of a line joins the next line);
- '...' is verbatim (may span lines); "..." gives X for '\\X' when X is one of " \\ ` $, drops '\\' with a
  newline, and keeps both characters otherwise; quoted and unquoted parts after '=' are joined;
- a value holding a control character other than tab and newline is dropped; the last line of a name wins.

No I/O and standard library only: the roles also run this file on hosts (filter pd_host_script).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
_BAD_VALUE = re.compile(r'[\x00-\x08\x0b-\x1f\x7f]')  # control characters but tab and newline
_BLANK = ' \t\n\r'
_NEWLINE = '\n\r'
_NEEDS_ESCAPE = '"\\`$'


def _assignments(text):
    """(name, value) pairs in the order of the text, as parse_env_file_internal pushes them."""
    key, value, state = [], [], 'pre_key'
    key_blank = value_blank = None  # where the trailing blanks of the name / the unquoted value start

    def done():
        name = ''.join(key[:key_blank] if key_blank is not None else key)
        return name, ''.join(value)

    for c in text:
        if state == 'pre_key':
            if c in '#;':
                state = 'comment'
            elif c not in _BLANK:
                key, value, key_blank, state = [c], [], None, 'key'
        elif state == 'key':
            if c in _NEWLINE:
                state = 'pre_key'
            elif c == '=':
                state = 'pre_value'
                value_blank = None
            else:
                if c not in _BLANK:
                    key_blank = None
                elif key_blank is None:
                    key_blank = len(key)
                key.append(c)
        elif state == 'pre_value':
            if c in _NEWLINE:
                state = 'pre_key'
                yield done()
            elif c == "'":
                state = 'single'
            elif c == '"':
                state = 'double'
            elif c == '\\':
                state = 'value_escape'
            elif c not in _BLANK:
                state = 'value'
                value.append(c)
        elif state == 'value':
            if c in _NEWLINE:
                state = 'pre_key'
                if value_blank is not None:
                    del value[value_blank:]
                yield done()
            elif c == '\\':
                state = 'value_escape'
                value_blank = None
            else:
                if c not in _BLANK:
                    value_blank = None
                elif value_blank is None:
                    value_blank = len(value)
                value.append(c)
        elif state == 'value_escape':
            state = 'value'
            if c not in _NEWLINE:
                value.append(c)
        elif state == 'single':
            if c == "'":
                state = 'pre_value'
            else:
                value.append(c)
        elif state == 'double':
            if c == '"':
                state = 'pre_value'
            elif c == '\\':
                state = 'double_escape'
            else:
                value.append(c)
        elif state == 'double_escape':
            state = 'double'
            if c in _NEEDS_ESCAPE:
                value.append(c)
            elif c != '\n':
                value.extend(('\\', c))
        elif state == 'comment':
            if c in _NEWLINE:
                state = 'pre_key'
    if state in ('pre_value', 'value', 'value_escape', 'single', 'double', 'double_escape'):
        if state == 'value' and value_blank is not None:
            del value[value_blank:]
        yield done()


def parse_env_file(text):
    """{name: value} of an EnvironmentFile= TEXT, as systemd hands it to the unit (see the module doc)."""
    out = {}
    for name, value in _assignments(text or ''):
        if _NAME.match(name) and not _BAD_VALUE.search(value):
            out.pop(name, None)
            out[name] = value
    return out
