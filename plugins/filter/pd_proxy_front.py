# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_proxy_front
short_description: The proxy tier of a proxy host - HAProxy's configuration text, the processes' units and ports
version_added: "1.0.0"
description:
  - For O(proxy_front=haproxy) of the proxy role. The text is computed in Python
    (plugins/module_utils/common/proxy_front.py) and written unchanged; nothing of it is Jinja logic.
  - HAProxy listens on the input address and O(port), balances leastconn over O(processes) processes of the proxy on
    127.0.0.1 from O(base_port), checks each with GET O(health_route), and never sends a request twice.
options:
  _input:
    description: The address HAProxy binds (the host's inter-node address, where the single proxy listened).
    type: str
    required: true
  port:
    description: The proxy port.
    type: int
    required: true
  base_port:
    description: The loopback port of process 1.
    type: int
    required: true
  processes:
    description: How many processes of the proxy run.
    type: int
    required: true
  health_route:
    description: The proxy's health route (the release table's proxy_health_route).
    type: str
    required: true
  cluster:
    description: The cluster's name, for the configuration's header.
    type: str
    default: ""
  metrics_port:
    description: The port of HAProxy's Prometheus exporter on the input address (C(/metrics)); V(0) for none.
    type: int
    default: 0
"""

EXAMPLES = r"""
# {{ vllm_pd_address.address | vllm_pd.ascend.pd_proxy_front(port=8000, base_port=18001, processes=2,
#    health_route='/healthcheck') }}
"""

RETURN = r"""
_value:
  description:
    - C(config) the text of /etc/vllm-pd/front.cfg; C(processes) one entry per process (C(index), C(unit),
      C(port)); C(unit) the front's unit; C(path) its configuration; C(socket) its admin socket.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common import proxy_front as F


def pd_proxy_front(address, port, base_port, processes, health_route, cluster='', metrics_port=0):
    try:
        text = F.front_config(str(address), int(port), int(base_port), int(processes), str(health_route), str(cluster),
                              metrics_port=int(metrics_port))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError('pd_proxy_front: %s' % exc)
    return dict(config=text, unit=F.FRONT_UNIT, path=F.FRONT_CONFIG, socket=F.ADMIN_SOCKET,
                processes=F.processes_plan(base_port, processes))


class FilterModule(object):
    def filters(self):
        return {"pd_proxy_front": pd_proxy_front}
