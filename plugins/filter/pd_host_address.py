# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pd_host_address
short_description: The inter-node address and NIC of a PD host, from inventory and gathered facts
version_added: "1.0.0"
description:
  - Returns C({address, interface, source}) for one host, in this order of precedence
    (fault 1 of the field report; vLLM binds and advertises only E(VLLM_HOST_IP)).
  - An explicit O(host_ip) (inventory V(vllm_pd_host_ip)) wins; it must be assigned on the host.
  - Else the single address of the host inside O(network) (inventory V(vllm_pd_network), a CIDR).
  - Else the single IPv4 address of O(interface) (inventory V(vllm_pd_interface)).
  - Zero or several candidates is an error listing the host's addresses and interfaces.
    There is never a silent fallback to the default route.
options:
  _input:
    description: The host's gathered facts (C(ansible_facts)), at least the C(network) subset.
    type: dict
    required: true
  host_ip:
    description: Explicit address (V(vllm_pd_host_ip)).
    type: str
  network:
    description: CIDR of the inter-node network (V(vllm_pd_network)).
    type: str
  interface:
    description: NIC name (V(vllm_pd_interface)).
    type: str
  hostname:
    description: Inventory name, used in error messages.
    type: str
requirements:
  - netaddr
"""

EXAMPLES = r"""
- name: Resolve the address vLLM must bind
  ansible.builtin.set_fact:
    vllm_pd_address: "{{ ansible_facts | vllm_pd.ascend.pd_host_address(host_ip=vllm_pd_host_ip | default(''),
      network=vllm_pd_network | default(''), interface=vllm_pd_interface | default(''), hostname=inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: C(address), C(interface) (NIC name) and C(source) (V(host_ip), V(network) or V(interface)).
  type: dict
"""

from ansible.errors import AnsibleFilterError

try:
    import netaddr
except ImportError:  # pragma: no cover - reported at call time
    netaddr = None


def host_interfaces(facts):
    """Map NIC name -> list of addresses (IPv4 and global IPv6) from gathered facts."""
    result = {}
    for name in facts.get("interfaces", []):
        nic = facts.get(name.replace("-", "_")) or {}
        addrs = []
        v4 = nic.get("ipv4")
        if isinstance(v4, dict):
            v4 = [v4]
        for entry in (v4 or []) + list(nic.get("ipv4_secondaries") or []):
            if entry.get("address"):
                addrs.append(entry["address"])
        for entry in nic.get("ipv6") or []:
            if entry.get("address") and entry.get("scope") != "link":
                addrs.append(entry["address"])
        result[name] = addrs
    return result


def _describe(nics):
    return "; ".join("%s=%s" % (n, ",".join(a) or "-") for n, a in sorted(nics.items()))


def resolve_host_address(facts, host_ip="", network="", interface="", hostname="this host"):
    """Pure resolution; raises ValueError with an actionable message."""
    nics = host_interfaces(facts)
    owners = {}
    for name, addrs in nics.items():
        for addr in addrs:
            owners.setdefault(addr, name)
    seen = _describe(nics)
    if host_ip:
        if host_ip not in owners:
            raise ValueError(
                "vllm_pd_host_ip=%s on host %s is not assigned to any interface of that host "
                "(it has: %s). Fix: set vllm_pd_host_ip to one of those addresses, or unset it and "
                "set vllm_pd_network to the inter-node CIDR." % (host_ip, hostname, seen))
        return {"address": host_ip, "interface": owners[host_ip], "source": "host_ip"}
    if network:
        if netaddr is None:
            raise ValueError("the netaddr Python library is required on the controller (pip install netaddr)")
        try:
            net = netaddr.IPNetwork(network)
        except (netaddr.AddrFormatError, ValueError, TypeError):
            raise ValueError("vllm_pd_network=%r for host %s is not a CIDR (example: 10.0.30.0/24)" % (network, hostname))
        matches = sorted((a, n) for a, n in owners.items() if netaddr.IPAddress(a) in net)
        if len(matches) == 1:
            return {"address": matches[0][0], "interface": matches[0][1], "source": "network"}
        if not matches:
            raise ValueError(
                "host %s has no address inside vllm_pd_network=%s (it has: %s). Fix: correct vllm_pd_network "
                "for this cluster, or set vllm_pd_host_ip for this host." % (hostname, network, seen))
        raise ValueError(
            "host %s has %d addresses inside vllm_pd_network=%s (%s). Fix: set vllm_pd_host_ip for this host "
            "to the one vLLM must bind, or narrow vllm_pd_network."
            % (hostname, len(matches), network, ", ".join("%s on %s" % m for m in matches)))
    if interface:
        if interface not in nics:
            raise ValueError("vllm_pd_interface=%s does not exist on host %s (it has: %s)" % (interface, hostname, seen))
        v4 = [a for a in nics[interface] if ":" not in a]
        if len(v4) != 1:
            raise ValueError(
                "vllm_pd_interface=%s on host %s has %d IPv4 addresses (%s); set vllm_pd_host_ip to choose one"
                % (interface, hostname, len(v4), ",".join(v4) or "none"))
        return {"address": v4[0], "interface": interface, "source": "interface"}
    raise ValueError(
        "no inter-node address for host %s: set vllm_pd_network (the cluster's CIDR), vllm_pd_host_ip or "
        "vllm_pd_interface. Auto-detection (the default route) is refused: it picks the wrong NIC on "
        "multi-NIC hosts. The host has: %s" % (hostname, seen))


def pd_host_address(facts, host_ip="", network="", interface="", hostname="this host"):
    try:
        return resolve_host_address(facts or {}, host_ip or "", network or "", interface or "", hostname or "this host")
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"pd_host_address": pd_host_address}
