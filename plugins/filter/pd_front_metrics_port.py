# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_front_metrics_port
short_description: The port of HAProxy's Prometheus exporter on a proxy host of the proxy tier
version_added: "1.1.0"
description:
  - The port HAProxy's built-in Prometheus exporter listens on, as the host's variables set it
    (C(proxy_front_metrics_port) before C(vllm_pd_proxy_front_metrics_port), 8405 when neither is set).
  - V(0) when the host runs no proxy tier (C(vllm_pd_proxy_front) is not V(haproxy)), sets V(0) (no exporter), or
    sets no port 0-65535 (the preflight's inventory check names that).
  - The same reading as the inventory check's and the monitoring targets' (module_utils common/proxy_front.py).
options:
  _input:
    description: The host's variables (C(hostvars[inventory_hostname])).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The exporter port this proxy host must find free
  ansible.builtin.debug:
    msg: "{{ hostvars[inventory_hostname] | vllm_pd.ascend.pd_front_metrics_port }}"
# -> 8405 with vllm_pd_proxy_front: haproxy and no port set; 0 without the tier
"""

RETURN = r"""
_value:
  description: The TCP port, or V(0) for no exporter.
  type: int
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.proxy_front import metrics_port


def pd_front_metrics_port(hostvars):
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError("pd_front_metrics_port: the host's variables must be a mapping, not a %s" % type(hostvars).__name__)
    return metrics_port(hostvars)[2] or 0


class FilterModule(object):
    def filters(self):
        return {"pd_front_metrics_port": pd_front_metrics_port}
