# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make the repository importable as ansible_collections.vllm_pd.ascend for the unit tests.

Once per session: <tmp>/ansible_collections/vllm_pd/ascend -> repo root, <tmp> on sys.path.
If the repo already sits in an ansible_collections tree (ansible-test units), that one is used.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import atexit
import os
import shutil
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _install_collection_path():
    parts = REPO_ROOT.split(os.sep)
    if len(parts) >= 3 and parts[-3] == 'ansible_collections' and parts[-2:] == ['vllm_pd', 'ascend']:
        root = os.sep.join(parts[:-3])
    else:
        root = tempfile.mkdtemp(prefix='vllm_pd_units_')
        ns_dir = os.path.join(root, 'ansible_collections', 'vllm_pd')
        os.makedirs(ns_dir)
        os.symlink(REPO_ROOT, os.path.join(ns_dir, 'ascend'))
        atexit.register(shutil.rmtree, root, True)
    if root not in sys.path:
        sys.path.insert(0, root)
    # a stale non-namespace 'ansible_collections' import would shadow ours
    mod = sys.modules.get('ansible_collections')
    if mod is not None and root + os.sep + 'ansible_collections' not in list(getattr(mod, '__path__', [])):
        for name in [n for n in sys.modules if n == 'ansible_collections' or n.startswith('ansible_collections.')]:
            del sys.modules[name]
    return root


COLLECTIONS_ROOT = _install_collection_path()


# --------------------------------------------------------------------------
# shared fixtures: real sockets in child processes, module harness

import json  # noqa: E402
import random  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

_CHILD = r'''
import socket, sys, time
fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
socks = []
for port in sys.argv[2].split(','):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6 and sys.argv[1] != '::':
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((sys.argv[1], int(port)))
    s.listen(16)
    socks.append(s)
sys.stdout.write('ready\n')
sys.stdout.flush()
time.sleep(300)
'''


def _port_is_free(port):
    for fam, addr in ((socket.AF_INET, '0.0.0.0'), (socket.AF_INET6, '::')):
        s = socket.socket(fam, socket.SOCK_STREAM)
        try:
            s.bind((addr, port))
        except (OSError, socket.error):
            return False
        finally:
            s.close()
    return True


def find_free_group(width=8, lo=28100, hi=None):
    """width consecutive ports, free on every address, below the ephemeral range."""
    if hi is None:
        try:
            with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
                hi = int(f.read().split()[0]) - 1
        except (IOError, OSError, ValueError):
            hi = 32767
    rng = random.Random()
    for _attempt in range(200):
        base = rng.randrange(lo, hi - width)
        if all(_port_is_free(p) for p in range(base, base + width)):
            return list(range(base, base + width))
    raise RuntimeError('no free port group found')


class Listener(object):
    def __init__(self, addr, ports):
        self.addr = addr
        self.ports = list(ports)
        self.proc = subprocess.Popen(
            [sys.executable, '-c', _CHILD, addr, ','.join(str(p) for p in self.ports)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline()
        if line.strip() != b'ready':
            err = self.proc.stderr.read()
            raise RuntimeError('listener child failed: %r' % err)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def spawn_listener():
    started = []

    def _spawn(addr, ports):
        lis = Listener(addr, ports if isinstance(ports, (list, tuple)) else [ports])
        started.append(lis)
        return lis
    yield _spawn
    for lis in started:
        lis.stop()
        for stream in (lis.proc.stdout, lis.proc.stderr):
            stream.close()


@pytest.fixture
def free_group():
    return find_free_group


class AnsibleExitJson(Exception):
    @property
    def result(self):
        return self.args[0]


class AnsibleFailJson(Exception):
    @property
    def result(self):
        return self.args[0]


@pytest.fixture
def run_module(monkeypatch):
    """run_module(module_obj, args) -> (failed, result) driving the real main()."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    warns = []

    def _exit(self, **kwargs):
        kwargs.setdefault('changed', False)
        kwargs['failed'] = False
        kwargs['warnings'] = list(warns)
        raise AnsibleExitJson(kwargs)

    def _fail(self, msg, **kwargs):
        kwargs['failed'] = True
        kwargs['msg'] = msg
        kwargs['warnings'] = list(warns)
        raise AnsibleFailJson(kwargs)

    def _warn(self, warning, **kwargs):
        warns.append(warning)

    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', _exit)
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', _fail)
    monkeypatch.setattr(basic.AnsibleModule, 'warn', _warn)

    def _run(mod, args):
        del warns[:]
        with patch_module_args(args):
            try:
                mod.main()
            except AnsibleExitJson as e:
                json.dumps(e.result)  # results must be JSON-serialisable
                return False, e.result
            except AnsibleFailJson as e:
                json.dumps(e.result)
                return True, e.result
        raise AssertionError('module returned without exit_json/fail_json')
    return _run


@pytest.fixture
def wait_until():
    """wait_until(pred, timeout=10.0, step=0.05) -> pred() became true in time (a fixture: test modules
    cannot import from conftest by name, other test trees have a conftest module too)."""
    def _wait(pred, timeout=10.0, step=0.05):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred():
                return True
            time.sleep(step)
        return pred()
    return _wait
