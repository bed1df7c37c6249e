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
import socket  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from http.server import BaseHTTPRequestHandler, HTTPServer  # noqa: E402

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


PORT_LO = 28100     # above the ADXL window of 8 NPUs (20000-27999)
PORT_BLOCK = 128    # ports per block; the widest group a test asks for is 64
PORT_LOCK_DIR = os.path.join(tempfile.gettempdir(), 'vllm_pd_unit_ports')


def _ephemeral_low():
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
            return int(f.read().split()[0])
    except (IOError, OSError, ValueError, IndexError):
        return 32768


class PortBlocks(object):
    """The ports of one test: whole blocks taken at once, disjoint runs handed out from them in order.

    Blocks are PORT_BLOCK ports, aligned from PORT_LO up to the ephemeral range (no outbound connection
    takes a port there meanwhile). take(width) hands out the next run of width consecutive ports of the
    test's block, each checked free on every address just before; a busy port is skipped, never handed
    out, and no port is handed out twice in a test (two independent random draws could overlap). Blocks
    go round robin over the session in a fixed order (the TIME_WAIT left by one test ages before its
    block comes round again); an flock on a file in the temp dir keeps a block to one test while it runs,
    also against other pytest sessions of these tests on the machine.
    """
    _turn = [0]     # session-wide: the block the next test starts looking at

    def __init__(self, lo=PORT_LO, hi=None, size=PORT_BLOCK):
        if hi is None:
            hi = _ephemeral_low() - 1
        self.size = size
        self.bases = list(range(lo, hi - size + 2, size))
        self.held = []      # [(base, lock file or None)]
        self.next_port = self.end = None

    def take(self, width=8):
        """width consecutive ports, free on every address, none of them handed out before in this test."""
        if not 1 <= width <= self.size:
            raise ValueError('a group of %d ports does not fit a block of %d' % (width, self.size))
        while True:
            port = self.next_port
            while port is not None and port + width <= self.end:
                busy = [p for p in range(port, port + width) if not _port_is_free(p)]
                if not busy:
                    self.next_port = port + width
                    return list(range(port, port + width))
                port = busy[-1] + 1
            self._take_block()

    def _take_block(self):
        mine = set(base for base, _lock in self.held)
        for _i in range(len(self.bases)):
            base = self.bases[PortBlocks._turn[0] % len(self.bases)]
            PortBlocks._turn[0] += 1
            if base in mine:
                continue
            lock = self._lock(base)
            if lock is False:
                continue            # another test session holds it
            self.held.append((base, lock))
            self.next_port, self.end = base, base + self.size
            return
        raise RuntimeError('no block of %d ports left in %d-%d' % (self.size, self.bases[0], self.bases[-1] + self.size - 1))

    @staticmethod
    def _lock(base):
        """The open, flocked lock file of the block; False: held by another process; None: no lock dir here."""
        try:
            import fcntl
            if not os.path.isdir(PORT_LOCK_DIR):
                try:
                    os.makedirs(PORT_LOCK_DIR)
                except OSError:
                    pass            # another session made it just now
            f = open(os.path.join(PORT_LOCK_DIR, '%d.lock' % base), 'a')
        except (ImportError, IOError, OSError):
            return None
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (IOError, OSError):
            f.close()
            return False
        return f

    def release(self):
        for _base, lock in self.held:
            if lock is not None:
                lock.close()
        del self.held[:]
        self.next_port = self.end = None


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
def port_block():
    """This test's PortBlocks: take(width) -> width consecutive free ports, disjoint from all taken before."""
    blocks = PortBlocks()
    yield blocks
    blocks.release()


@pytest.fixture
def free_group(port_block):
    """free_group(width=8) -> width consecutive free ports below the ephemeral range; every call of one
    test gets ports no earlier call got (they come from the test's reserved block)."""
    return port_block.take


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
def http_server():
    """http_server(respond) -> 'http://127.0.0.1:PORT' of a loopback server for the test; RESPOND(path, headers)
    gives each GET its (status, body) or (status, body, {header: value}). Shut down at the end of the test."""
    servers = []

    def _serve(respond):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                answer = respond(self.path, self.headers)
                status, body, headers = answer if len(answer) == 3 else answer + ({},)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args):
                pass

        httpd = HTTPServer(('127.0.0.1', 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return 'http://127.0.0.1:%d' % httpd.server_address[1]

    yield _serve
    for httpd in servers:
        httpd.shutdown()


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
