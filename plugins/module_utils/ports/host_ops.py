# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Everything kv_port_group reads from or does to the host, in one class (tests replace parts).

Commands run through module.run_command when a module is given, else through subprocess, so the
free check can run outside Ansible (the engine units' start guard imports it on the host).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import os
import socket
import subprocess

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import owners as owners_mod
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.port_group import detect_npu_count, read_sysctl_ranges
from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports.sock_diag import read_tcp_table

# what a holder's unit was before the preflight stopped it (restored by stop_pd.yml)
UNIT_STATE_PROPS = ('Id', 'LoadState', 'ActiveState', 'SubState', 'UnitFileState', 'TriggeredBy', 'Triggers')
_BIN_DIRS = ('/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin')


def _which(name):
    for d in os.environ.get('PATH', '').split(os.pathsep) + list(_BIN_DIRS):
        path = os.path.join(d, name)
        if d and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def run_to_eof(argv):
    """(rc, stdout, stderr) of argv (a list, never a shell), both pipes read to their end.

    AnsibleModule.run_command can return a command's exit code with its output unread: when its
    1-second select times out and the child writes and exits before the poll that follows, the loop
    ends (ansible/ansible#51393). Seen as "rc 0, no output" from hccn_tool under load, with the tools
    run in threads; communicate() reads to EOF.
    """
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate()
    except OSError as e:
        return 127, '', str(e)
    return proc.returncode, out.decode('utf-8', 'replace'), err.decode('utf-8', 'replace')


class HostOps(object):
    """Reads and actions of one module run; module may be None (plain Python caller)."""

    def __init__(self, module=None, proc_root='/proc', dev_root='/dev'):
        self.module = module
        self.proc_root = proc_root
        self.dev_root = dev_root
        self._info = {}
        self._names = {}
        self._own_containers = owners_mod.own_containers(proc_root)
        self.socket_source = None

    # -- command plumbing -------------------------------------------------
    def bin_path(self, name, required=False):
        if self.module is not None:
            return self.module.get_bin_path(name, required=required)
        path = _which(name)
        if path is None and required:
            raise OSError(errno.ENOENT, '%s is not installed' % name)
        return path

    def run(self, argv):
        """(rc, stdout, stderr) of argv (a list, never a shell string)."""
        if self.module is not None:
            return self.module.run_command(argv)
        return run_to_eof(argv)

    # -- sockets and processes --------------------------------------------
    def reset(self):
        self._info = {}

    def sockets(self, ports):
        socks, self.socket_source = read_tcp_table(self.proc_root, ports=ports)
        return socks

    def owners(self, inodes):
        return owners_mod.socket_owners(self.proc_root, inodes)

    def process_info(self, pid):
        if pid not in self._info:
            info = owners_mod.process_info(pid, self.proc_root, self._own_containers)
            if info.get('container'):
                info['container_name'] = self.container_name(info.get('container_runtime'), info['container'])
            self._info[pid] = info
        return self._info[pid]

    def container_name(self, runtime, cid):
        """Name of a holder's container: docker's config file, else ENGINE container inspect (cached per id)."""
        key = (runtime, cid)
        if key not in self._names:
            name = owners_mod.resolve_container_name(dict(runtime=runtime, id=cid))
            if name is None and runtime in ('podman', 'docker'):
                found = self.container_inspect(runtime, cid)
                name = found['name'] if found else None
            self._names[key] = name
        return self._names[key]

    def container_inspect(self, engine, ref):
        """{'id', 'pid', 'name'} of container REF from ENGINE (podman/docker), or None (no engine, no such container)."""
        path = self.bin_path(engine)
        if not path:
            return None
        rc, out, _err = self.run(
            [path, 'container', 'inspect', '--format', '{{.Id}} {{.State.Pid}} {{.Name}}', ref])
        return owners_mod.parse_container_inspect(out) if rc == 0 else None

    def is_descendant(self, pid, ancestor):
        return owners_mod.is_descendant(pid, ancestor, self.proc_root)

    def pid_alive(self, pid):
        return owners_mod.pid_alive(pid, self.proc_root)

    def npu_count(self):
        return detect_npu_count(self.dev_root)

    def sysctl_ranges(self):
        return read_sysctl_ranges(self.proc_root)

    def write_reserved(self, value):
        path = os.path.join(self.proc_root, 'sys/net/ipv4/ip_local_reserved_ports')
        with open(path, 'w') as f:
            f.write(value + '\n')

    def bind_probe(self, host_ip, port):
        """errno of bind(host_ip, port) with SO_REUSEADDR, or None when it works."""
        family = socket.AF_INET6 if ':' in host_ip else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host_ip, port))
        except socket.error as e:
            return getattr(e, 'errno', None) or -1
        finally:
            s.close()
        return None

    def host_ip_local(self, host_ip):
        """None if host_ip can be bound here, else the error text."""
        family = socket.AF_INET6 if ':' in host_ip else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.bind((host_ip, 0))
        except socket.error as e:
            if getattr(e, 'errno', None) == errno.EADDRNOTAVAIL:
                return str(e)
            return None
        finally:
            s.close()
        return None

    # -- systemd ----------------------------------------------------------
    def _systemctl(self):
        return self.bin_path('systemctl', required=True)

    def _unit_cmd(self, verb, unit):
        rc, _out, err = self.run([self._systemctl(), verb, '--', unit])
        return rc, err

    def stop_unit(self, unit):
        return self._unit_cmd('stop', unit)

    def disable_unit(self, unit, extra=()):
        rc, _out, err = self.run([self._systemctl(), 'disable'] + list(extra) + ['--', unit])
        return rc, err

    def unit_show(self, unit):
        rc, out, err = self.run(
            [self._systemctl(), 'show', '-p', 'LoadState', '-p', 'ActiveState', '-p', 'SubState',
             '-p', 'MainPID', '-p', 'Result', '--', unit])
        if rc != 0:
            return dict(error=err.strip() or 'systemctl show failed (rc=%d)' % rc)
        return owners_mod.parse_systemctl_show(out)

    def unit_state(self, unit):
        """{Id, LoadState, ActiveState, UnitFileState, TriggeredBy, Triggers, ...} or {'error': text}."""
        argv = [self._systemctl(), 'show']
        for prop in UNIT_STATE_PROPS:
            argv += ['-p', prop]
        rc, out, err = self.run(argv + ['--', unit])
        if rc != 0:
            return dict(error=(err or '').strip() or 'systemctl show failed (rc=%d)' % rc)
        return owners_mod.parse_systemctl_show(out)

    def list_sockets(self):
        """Output of systemctl list-sockets (every socket unit systemd listens for), '' when not available."""
        systemctl = self.bin_path('systemctl')
        if not systemctl:
            return ''
        rc, out, _err = self.run([systemctl, 'list-sockets', '--all', '--full', '--no-legend', '--no-pager'])
        return out if rc == 0 else ''

    # -- containers -------------------------------------------------------
    def stop_container(self, engine, name):
        path = self.bin_path(engine)
        if not path:
            return 127, '%s is not installed' % engine
        rc, _out, err = self.run([path, 'stop', name])
        return rc, err

    def container_restart_policy(self, engine, name):
        """The container's restart policy name ('no', 'always', ...), '' for none, None when unreadable."""
        path = self.bin_path(engine)
        if not path:
            return None
        rc, out, _err = self.run([path, 'container', 'inspect', '--format', '{{.HostConfig.RestartPolicy.Name}}', name])
        return out.strip() if rc == 0 else None

    def set_container_restart(self, engine, name, policy):
        """ENGINE update --restart POLICY NAME -> (rc, err); podman < 4.? and old docker may refuse it."""
        path = self.bin_path(engine)
        if not path:
            return 127, '%s is not installed' % engine
        rc, _out, err = self.run([path, 'update', '--restart', policy, name])
        return rc, err
