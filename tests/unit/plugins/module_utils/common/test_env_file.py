# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""common/env_file.py: EnvironmentFile= as systemd reads it (src/basic/env-file.c), and the round trip of what
the roles' env templates write (inventory/systemd_syntax.py env_lines, filter pd_systemd_env)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import random

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.env_file import parse_env_file
from ansible_collections.vllm_pd.ascend.plugins.module_utils.inventory.systemd_syntax import env_lines


@pytest.mark.parametrize('text, env', [
    # comments (# and ;, after blanks too), blank lines, lines without '='
    ('# c\n  ; c\n\nA=1\nnoequals\n', {'A': '1'}),
    # blanks around the name and before the value go; an unquoted value keeps inner blanks, loses trailing ones
    ('  B  =   two  words \t \n', {'B': 'two  words'}),
    # empty values, with and without a newline at the end
    ('E=\nF=""\nG=\'\'\nH=', {'E': '', 'F': '', 'G': '', 'H': ''}),
    # double quotes: \" \\ \` \$ unescape; another escape keeps both characters; \ newline joins
    ('C="x \\"y\\" \\\\ \\` \\$HOME \\q"\n', {'C': 'x "y" \\ ` $HOME \\q'}),
    ('C="one\\\ntwo"\n', {'C': 'onetwo'}),
    # single quotes: verbatim, across lines
    ("D='v\\w \"q\"'\nM='a\nb'\n", {'D': 'v\\w "q"', 'M': 'a\nb'}),
    # unquoted: \X gives X, a trailing \ joins the next line, # and quotes inside a value are kept
    ('U=\\ a\\\\b\nV=one\\\ntwo\nW=a#b "c"\n', {'U': ' a\\b', 'V': 'onetwo', 'W': 'a#b "c"'}),
    # a quoted part and what follows it are joined; a quote after an unquoted character is kept (systemd.exec(5))
    ('J="a b"c\'d\'\n', {'J': "a bc'd'"}),
    # systemd drops a name that is not [A-Za-z_][A-Za-z0-9_]*: `export X=` sets nothing
    ('export X=1\n1A=2\nA-B=3\nOK_1=4\n', {'OK_1': '4'}),
    # the last line of a name wins; CRLF files read as LF ones
    ('A=1\r\nA=2\r\nB="x"\r\n', {'A': '2', 'B': 'x'}),
    # a control character other than tab and newline drops the assignment; a tab stays
    ('A="x\x01y"\nB="x\ty"\n', {'B': 'x\ty'}),
    ('', {}), (None, {}),
])
def test_systemd_rules(text, env):
    assert parse_env_file(text) == env


HOSTILE = [' lead', 'trail ', '\ttab', '"quoted"', "'single", 'back\\slash', '$HOME', '${X}', '`cmd`', 'a=b', '#x', ';x',
           'x #y', 'é模ß', '', '\\', '"', "'", '\\"', 'a\tb', '%h', 'export']


def test_what_the_env_template_writes_reads_back_unchanged():
    rng = random.Random(7)
    alphabet = [chr(c) for c in range(0x20, 0x7f)] + ['é', '模', '\t']
    words = HOSTILE + [''.join(rng.choice(alphabet) for _c in range(rng.randrange(0, 16))) for _w in range(500)]
    env = dict(('K%d' % i, w) for i, w in enumerate(words))
    text = '# {{ ansible_managed }}\nVLLM_HOST_IP=10.0.0.1\n' + '\n'.join(env_lines(env)) + '\n'
    assert parse_env_file(text) == dict(env, VLLM_HOST_IP='10.0.0.1')
    # the container runtime's literal file (podman/docker --env-file read it verbatim): the same values
    plain = dict((k, v) for k, v in env.items() if '\\' not in v and v == v.strip(' \t') and v[:1] not in '\'"')
    assert parse_env_file('\n'.join(env_lines(plain, literal=True))) == plain
