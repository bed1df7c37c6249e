# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""run_to_eof: what npu_readiness runs its tools with (both pipes read to their end)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import sys

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.host_ops import run_to_eof


def test_the_output_written_just_before_exit_after_a_silent_second_is_returned():
    # silent for longer than run_command's 1-second select, then output and exit at once
    code = 'import sys, time; time.sleep(1.2); print("ipaddr:1.2.3.4"); sys.stderr.write("e"); sys.exit(3)'
    assert run_to_eof([sys.executable, '-c', code]) == (3, 'ipaddr:1.2.3.4\n', 'e')


def test_a_missing_tool_is_rc_127_with_the_reason():
    rc, out, err = run_to_eof(['/nonexistent/hccn_tool', '-i', '0', '-ip', '-g'])
    assert rc == 127 and out == '' and 'No such file' in err
