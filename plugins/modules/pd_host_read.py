#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
module: pd_host_read
short_description: Read in one call what the preflight and the engine plan need from a PD host
version_added: "1.2.0"
description:
  - One module run instead of one per read, since every read costs the host a round trip before the preflight's
    first check can answer.
  - The model directory (as M(vllm_pd.ascend.pd_model_facts) reads it) and the vllm-ascend and vLLM releases in the
    Python of each engine kind's vllm binary (the interpreter of its C(#!) line; in the engine image for the
    container runtime, C(ENGINE run --rm --net=none --entrypoint sh IMAGE)), one read per distinct binary and image.
  - With O(host_facts) also which machine this is (boot id, device and inode of C(/etc/systemd/system)), the
    C(vllm-pd-*) units (C(systemctl list-units)), the NICs and addresses (C(/sys/class/net), C(ip -o addr show),
    as network facts) and C(/etc/hccn.conf); with O(launch) the command line of each running engine unit's main
    process and the launch settings read from it.
  - Reads only. The machine and hccn.conf are best effort (empty when unreadable); a release that cannot be read is
    reported in its RV(release) record, not an error. A failing C(systemctl) or C(ip) fails the host.
options:
  host:
    description: The inventory name of the host, for the messages.
    type: str
    required: true
  model:
    description: The model to read, C({path, kind}) (V(vllm_pd_model), V(vllm_pd_model_kind)); not read when omitted.
    type: dict
    suboptions:
      path:
        description: The model path given to C(vllm serve).
        type: str
        required: true
      kind:
        description: V(auto) (detect from C(config.json)), V(moe) or V(dense).
        type: str
        default: auto
        choices: [auto, moe, dense]
  engines:
    description: The engine kinds of the host whose release is read, with their resolved settings.
    type: list
    elements: dict
    default: []
    suboptions:
      kind:
        description: The engine kind.
        type: str
        required: true
        choices: [prefill, decode]
      binary:
        description: The vllm binary (a name on PATH or a path).
        type: str
        default: vllm
      runtime:
        description: V(systemd) reads on the host, V(container) in O(engines[].container_image).
        type: str
        default: systemd
        choices: [systemd, container]
      container_engine:
        description: The container engine of the container runtime.
        type: str
        default: podman
      container_image:
        description: The engine image of the container runtime.
        type: str
        default: ''
  host_facts:
    description: Also read the machine, the C(vllm-pd-*) units, the NICs, the addresses and C(/etc/hccn.conf).
    type: bool
    default: false
  launch:
    description: Also read the command lines of the running engine units (implies the unit read of O(host_facts)).
    type: bool
    default: false
  proxy:
    description:
      - On a proxy host, also ask O(proxy.python) whether it can run the proxy (the preflight's C(ProxyPythonUnfit)),
        by running a short probe with that interpreter; not asked when omitted.
    type: dict
    suboptions:
      python:
        description: The proxy's interpreter (V(proxy_python)).
        type: str
        required: true
      script:
        description: The example proxy script (V(proxy_script)); empty for the mooncake wheel's proxy module.
        type: str
        default: ''
      min_python:
        description: The oldest Python (C(X.Y)) the release's example proxy runs on; empty when not known.
        type: str
        default: ''
      modules:
        description: Modules the release's example proxy imports besides those its script shows.
        type: list
        elements: str
        default: []
      front_binary:
        description: The HAProxy binary of the proxy tier (V(proxy_front=haproxy)); whether it is there and executable
          is RV(proxy_front). Empty checks nothing.
        type: str
        default: ''
extends_documentation_fragment:
  - vllm_pd.ascend.attributes
  - vllm_pd.ascend.attributes.read_only
author:
  - vllm_pd.ascend maintainers (@vllm-pd)
"""

EXAMPLES = r"""
- name: Read the host before its checks
  vllm_pd.ascend.pd_host_read:
    host: "{{ inventory_hostname }}"
    model:
      path: /data/models/Qwen3-8B
    engines:
      - kind: prefill
        binary: /opt/vllm/bin/vllm
    host_facts: true
    launch: true
  register: host_read
# host_read.release.prefill.vllm_ascend == '0.23.0', host_read.running[0].tp == 2
"""

RETURN = r"""
model:
  description: What the model directory is (RV(vllm_pd.ascend.pd_model_facts#module:model)).
  returned: when O(model) is given
  type: dict
release:
  description: Per engine kind of O(engines), the release its Python has.
  returned: always
  type: dict
  sample: {"prefill": {"vllm_ascend": "0.23.0", "vllm": "0.23.0", "python": "/usr/bin/python3", "error": null,
           "where": "vllm"}}
  contains:
    vllm_ascend:
      description: The vllm-ascend version, null when not installed or not read.
      type: str
    vllm:
      description: The vLLM version, null when not installed or not read.
      type: str
    python:
      description: The interpreter that was read.
      type: str
    error:
      description: Why nothing could be read (binary not on PATH, no C(#!) line, image not runnable), else null.
      type: str
    where:
      description: The binary read, or C(ENGINE IMAGE BINARY) for the container runtime.
      type: str
machine:
  description: C(BOOT_ID DEVICE:INODE) of the running kernel and C(/etc/systemd/system); empty when unreadable.
  returned: with O(host_facts)
  type: str
unit_lines:
  description: The lines of C(systemctl list-units --all --plain --no-legend --type=service 'vllm-pd-*').
  returned: with O(host_facts) or O(launch)
  type: list
  elements: str
active_units:
  description: The units of RV(unit_lines) that are active, activating, reloading or deactivating.
  returned: with O(host_facts) or O(launch)
  type: list
  elements: str
network:
  description:
    - The host's NICs (C(/sys/class/net)) and addresses (C(ip -o addr show)) as the network facts
      P(vllm_pd.ascend.pd_host_address#filter) reads, C(interfaces) and per NIC (C(-) written C(_)) C(ipv4),
      C(ipv4_secondaries) and C(ipv6).
    - When C(ip) is missing or fails the module fails naming the host and the fix.
  returned: with O(host_facts)
  type: dict
hccn_text:
  description: The text of C(/etc/hccn.conf), empty when unreadable.
  returned: with O(host_facts)
  type: str
launch:
  description: The argv words of the main process of each running engine unit (environment not read).
  returned: with O(launch)
  type: dict
proxy_python:
  description: What O(proxy.python) answered; C(problems) is empty when it can run the proxy.
  returned: with O(proxy)
  type: dict
  sample: {"python": "3.11.2", "problems": ["it cannot import fastapi"]}
  contains:
    python:
      description: The version of that Python, null when it did not run.
      type: str
    problems:
      description: Why it cannot run the proxy (a missing import, too old a Python, an unreadable script, or why it
        did not run at all).
      type: list
      elements: str
proxy_front:
  description: Whether O(proxy.front_binary) is a file this host can execute (the preflight's ProxyFrontMissing).
  returned: with O(proxy.front_binary)
  type: dict
  sample: {"binary": "/usr/sbin/haproxy", "found": true}
running:
  description: The launch settings of each running engine (C(vllm serve) command lines), with C(host), C(unit) and C(kind).
  returned: always
  type: list
  elements: dict
"""

import os
import threading

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_pd.ascend.plugins.module_utils.doctor.doctor_launch import running_engines
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host import host_read, proxy_probe, release_read
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.ip_addr import AddressReadError, parse_addresses
from ansible_collections.vllm_pd.ascend.plugins.module_utils.model.pd_model import model_facts, read_file


def _text(path):
    data = read_file(path)
    return data.decode('utf-8', 'replace') if data is not None else ''


def _run(module, argv):
    """(rc, stdout, stderr, msg) of ARGV; a missing program is rc and msg, as the command module reports it."""
    try:
        rc, out, err = module.run_command(argv, handle_exceptions=False)
    except OSError as exc:
        return exc.errno or 2, '', '', str(exc)
    return rc, out, err, ''


def _started(module, argv):
    """_run(module, ARGV) in a thread of its own; the returned function waits for it and gives its answer. The reads
    that start another Python (the release, proxy_python) take a few hundred ms each: side by side with the others,
    the host answers about as fast as its slowest read, not the sum of them."""
    answer = []
    worker = threading.Thread(target=lambda: answer.append(_run(module, argv)))
    worker.daemon = True
    worker.start()

    def wait():
        worker.join()
        return answer[0]
    return wait


def _machine():
    try:
        st = os.lstat('/etc/systemd/system')  # stat -c %d:%i: the directory itself, not a symlink's target
    except OSError:
        return ''
    return host_read.machine(_text('/proc/sys/kernel/random/boot_id'), st.st_dev, st.st_ino)


def _units(module, host):
    rc, out, err, msg = _run(module, host_read.UNITS_ARGV)
    if rc != 0:
        module.fail_json(msg="host %s: `%s` failed (rc %s): %s. Fix: the preflight reads the vllm_pd units with systemd's "
                             "systemctl; run the deployment on a systemd host (systemd as PID 1) where systemctl works for "
                             "the connecting user (become)." % (host, ' '.join(host_read.UNITS_ARGV), rc,
                                                                (err or msg or out).strip()[-300:]), rc=rc)
    return host_read.unit_lines(out)


def _nics():
    try:
        return sorted(os.listdir('/sys/class/net'))
    except OSError:
        return []


def _launch(module, units):
    out = {}
    for unit in units:
        rc, pid_text, _err, _msg = _run(module, ['systemctl', 'show', '--property=MainPID', '--value', '--', unit])
        pid = host_read.main_pid(pid_text) if rc == 0 else None
        data = read_file('/proc/%d/cmdline' % pid) if pid else None
        if data is not None:  # a unit without a main process, or one that ended meanwhile, is left out
            out[unit] = host_read.cmdline_words(data)
    return out


def main():
    engine = dict(kind=dict(type='str', required=True, choices=['prefill', 'decode']),
                  binary=dict(type='str', default='vllm'),
                  runtime=dict(type='str', default='systemd', choices=['systemd', 'container']),
                  container_engine=dict(type='str', default='podman'),
                  container_image=dict(type='str', default=''))
    module = AnsibleModule(argument_spec=dict(
        host=dict(type='str', required=True),
        model=dict(type='dict', options=dict(path=dict(type='str', required=True),
                                             kind=dict(type='str', default='auto', choices=['auto', 'moe', 'dense']))),
        engines=dict(type='list', elements='dict', default=[], options=engine),
        host_facts=dict(type='bool', default=False),
        launch=dict(type='bool', default=False),
        proxy=dict(type='dict', options=dict(python=dict(type='str', required=True),
                                             script=dict(type='str', default=''),
                                             min_python=dict(type='str', default=''),
                                             modules=dict(type='list', elements='str', default=[]),
                                             front_binary=dict(type='str', default='')))),
        supports_check_mode=True)
    p, host = module.params, module.params['host']
    result = dict(changed=False, release={}, running=[])
    releases = [(target, _started(module, target['argv'])) for target in release_read.read_targets(p['engines'])]
    proxy = p['proxy']
    proxy_answer = _started(module, proxy_probe.probe_argv(proxy['python'], proxy['script'], proxy['min_python'],
                                                           proxy['modules'])) if proxy else None
    if p['host_facts'] or p['launch']:
        result['unit_lines'] = _units(module, host)
        result['active_units'] = host_read.active_units(result['unit_lines'])
    if p['host_facts']:
        _rc, addresses, err, msg = _run(module, ['ip', '-o', 'addr', 'show'])
        try:
            network = parse_addresses((addresses + err) or msg, _nics())
        except AddressReadError as exc:
            module.fail_json(msg=exc.fix(host))
        result.update(machine=_machine(), network=network, hccn_text=_text('/etc/hccn.conf').strip())
    if p['model']:
        result['model'] = model_facts(p['model']['path'], p['model']['kind'])
    if p['launch']:
        result['launch'] = _launch(module, host_read.engine_units(result['active_units']))
        result['running'] = running_engines(result['launch'], host)
    for target, answer in releases:
        record = release_read.release_record(target['key'], *answer())
        for kind in target['kinds']:
            result['release'][kind] = record
    if proxy_answer:
        result['proxy_python'] = proxy_probe.probe_answer(*proxy_answer())
    if proxy and proxy['front_binary']:
        binary = proxy['front_binary']
        result['proxy_front'] = dict(binary=binary, found=os.path.isfile(binary) and os.access(binary, os.X_OK))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
