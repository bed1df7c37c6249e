# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_ip_facts
short_description: A host's network facts from C(ip -o addr show) and the names in /sys/class/net
version_added: "1.2.0"
description:
  - Returns the part of C(ansible.builtin.setup) C(gather_subset=network) that
    P(vllm_pd.ascend.pd_host_address#filter) reads, so the preflight resolves the inter-node address from the
    command that reads the machine and gathers no facts (one module run less per host before the checks answer).
  - Per NIC (C(-) written C(_), as C(setup) does) C(ipv4) (first primary address), C(ipv4_secondaries) and
    C(ipv6) (with C(scope)); an address with a label (C(eth0:1)) belongs to its NIC (C(eth0)).
  - Output that has no address line (C(ip) missing or failing) is an error naming O(hostname) and the fix.
options:
  _input:
    description: The output of C(ip -o addr show).
    type: str
    required: true
  nics:
    description: The NIC names of the host (C(ls /sys/class/net)), also those without an address.
    type: list
    elements: str
  hostname:
    description: Inventory name, used in the error message.
    type: str
"""

EXAMPLES = r"""
- name: Resolve the inter-node address from the addresses read with the machine
  ansible.builtin.set_fact:
    vllm_pd_address: "{{ addr_text | vllm_pd.ascend.pd_ip_facts(nics=nic_names, hostname=inventory_hostname)
      | vllm_pd.ascend.pd_host_address(network=vllm_pd_network, hostname=inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: C(interfaces) (list of NIC names) and one dict per NIC with C(ipv4), C(ipv4_secondaries), C(ipv6).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.ip_addr import AddressReadError, parse_addresses


def pd_ip_facts(text, nics=None, hostname="this host"):
    try:
        return parse_addresses(text or "", nics or [])
    except AddressReadError as exc:
        raise AnsibleFilterError(
            "cannot read the addresses of host %s: `ip -o addr show` printed %r. Fix: install iproute2 (the `ip` "
            "command) on %s; the preflight reads the host's addresses with it" % (hostname, str(exc), hostname))


class FilterModule(object):
    def filters(self):
        return {"pd_ip_facts": pd_ip_facts}
