# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing argv words and environment values the way systemd reads them back.

Shell quoting is not systemd quoting: systemd expands '%' specifiers in every ExecStart= word
(after unquoting), substitutes '$VAR' / '${VAR}' when it runs the command, takes a lone ';' as a
command separator and backslash escapes C-style (systemd.service(5) "Command lines",
systemd.syntax(7) "Quoting"). EnvironmentFile= has its own, shell-like rules (systemd.exec(5)).
Pure functions; ValueError names what cannot be written.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
EXEC_PREFIX = "-@:+!"


def _text(word, what):
    if isinstance(word, bool) or not isinstance(word, (str, int, float)):
        raise ValueError("%s %r is not a string" % (what, word))
    word = str(word)
    m = CONTROL.search(word)
    if m:
        raise ValueError("%s %r holds the control character %r, which systemd cannot take in one word"
                         % (what, word, m.group()))
    return word


def exec_word(word, first=False):
    """One ExecStart= word that systemd turns back into exactly WORD.

    Inside double quotes systemd C-unescapes, so '\\' and '"' get a backslash; '%' becomes '%%'
    (specifiers are expanded after unquoting) and '$' becomes '$$' (variable substitution at
    exec time). Quoting every word also keeps a lone ';' from separating commands.
    """
    word = _text(word, "argv word")
    if first and (not word or word[0] in EXEC_PREFIX or "$" in word):
        # systemd reads the prefixes; '$$' would reach argv[0] as '$' but not the executed path
        raise ValueError("executable %r is empty, starts with one of systemd's prefixes %s or holds '$'" % (word, EXEC_PREFIX))
    word = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return '"%s"' % word


def exec_line(argv):
    """The value of ExecStart= for ARGV (a list of words, the executable first)."""
    if isinstance(argv, (str, bytes)) or not hasattr(argv, "__iter__"):
        raise ValueError("the command must be a list of argv words, not %r" % (argv,))
    argv = list(argv)
    if not argv:
        raise ValueError("the command is empty")
    return " ".join(exec_word(w, first=(i == 0)) for i, w in enumerate(argv))


def env_value(value, literal=False):
    """VALUE for one KEY=VALUE line of an EnvironmentFile=.

    Left bare when systemd reads it back unchanged (no backslash, no blank at either end, no
    leading quote); else double-quoted with '"', '\\', '`' and '$' backslash-escaped, as
    systemd.exec(5) says for double-quoted values. LITERAL (a file also passed to podman/docker
    --env-file, which read values verbatim) refuses values that would need quoting. Errors never
    show the value (it may be a secret).
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError("the value is a %s, not a string" % type(value).__name__)
    value = str(value)
    m = CONTROL.search(value.replace("\t", ""))
    if m:
        raise ValueError("the value holds the control character %r" % m.group())
    plain = "\\" not in value and value == value.strip(" \t") and value[:1] not in ("'", '"')
    if plain:
        return value
    if literal:
        raise ValueError("the value has blanks at an end, a backslash or a leading quote: podman and "
                         "docker --env-file would read it differently from systemd")
    return '"%s"' % re.sub(r'(["\\`$])', r"\\\1", value)


def env_lines(env, literal=False):
    """KEY=VALUE lines (sorted by key) for the mapping ENV."""
    if not isinstance(env, dict):
        raise ValueError("the environment must be a mapping, not a %s" % type(env).__name__)
    lines = []
    for key in sorted(env, key=str):
        if not isinstance(key, str) or not ENV_KEY.match(key):
            raise ValueError("environment variable name %r is not [A-Za-z_][A-Za-z0-9_]*" % (key,))
        try:
            lines.append("%s=%s" % (key, env_value(env[key], literal)))
        except ValueError as exc:
            # the key, never the value: it may be a secret
            raise ValueError("environment variable %s: %s" % (key, exc))
    return lines
