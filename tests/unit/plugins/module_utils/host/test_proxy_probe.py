# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether proxy_python can run the proxy (module pd_host_read, the preflight's ProxyPythonUnfit): the probe run by
this test's own Python on proxy scripts written here, and what each answer says."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import subprocess
import sys

from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.proxy_probe import probe_answer, probe_argv

PROXY = '''import json
import fastapi_of_no_site
from typing import Any
try:
    import uvloop_of_no_site
except ImportError:
    pass


def main():
    import inner_of_no_site


if __name__ == "__main__":
    from argparse import ArgumentParser
    import main_of_no_site
'''


def ask(script, min_python='', modules=(), python=sys.executable):
    r = subprocess.run(probe_argv(python, str(script) if script else '', min_python, list(modules)),
                       capture_output=True, text=True, check=False)
    return probe_answer(r.returncode, r.stdout, r.stderr, '')


def test_the_script_s_unconditional_imports_and_the_release_s_are_asked_for(tmp_path):
    script = tmp_path / 'proxy.py'
    script.write_text(PROXY)
    answer = ask(script, '3.9', ['json', 'release_import_of_no_site'])
    assert answer['python'] == '%d.%d.%d' % sys.version_info[:3]
    # a try's import is optional, a function's runs later (not at start); the __main__ block's counts
    assert answer['problems'] == ['it cannot import release_import_of_no_site, fastapi_of_no_site, main_of_no_site']


def test_a_python_older_than_the_release_s_proxy_and_a_script_it_cannot_parse_are_named(tmp_path):
    script = tmp_path / 'proxy.py'
    script.write_text('def f(:\n')
    newer = '%d.%d' % (sys.version_info[0], sys.version_info[1] + 1)
    problems = ask(script, newer)['problems']
    assert problems[0] == "it is Python %d.%d; the release's example proxy needs %s or newer" % (
        sys.version_info[0], sys.version_info[1], newer)
    assert problems[1].startswith('cannot parse proxy_script %s (line 1: ' % script)


def test_an_unreadable_script_and_the_wheel_proxy_module(tmp_path):
    assert ask(tmp_path / 'gone.py')['problems'] == ['cannot read proxy_script %s: No such file or directory'
                                                     % (tmp_path / 'gone.py')]
    # no script: the mooncake wheel's proxy module; the release's floor and imports are the example proxy's only
    argv = probe_argv('/usr/bin/python3', '', '3.10', ['fastapi'])
    assert argv[0] == '/usr/bin/python3' and argv[3:] == ['', '', 'mooncake.vllm_v1_proxy_server']
    assert ask('', '99.0', ['fastapi'])['problems'] == ['it cannot import mooncake.vllm_v1_proxy_server']


def test_an_interpreter_that_does_not_run_is_one_problem_naming_why():
    assert probe_answer(2, '', '', '[Errno 2] No such file or directory: /opt/none/python3') == dict(
        python=None, problems=['it did not run: [Errno 2] No such file or directory: /opt/none/python3'])
    assert probe_answer(1, '', 'SyntaxError: invalid syntax\n', '') == dict(
        python=None, problems=['it did not run: SyntaxError: invalid syntax'])
    assert probe_answer(0, 'not json', '', '')['problems'] == ['it did not run: not json']
