# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.vllm_pd.ascend.plugins.filter.pd_host_address import host_interfaces, resolve_host_address
from ansible_collections.vllm_pd.ascend.plugins.module_utils.host.ip_addr import AddressReadError, parse_addresses, parse_ip_addr

# `ip -o addr show` on a lab host (iproute2 6.1): NPU addresses as secondaries of eth0
LAB = r"""1: lo    inet 127.0.0.1/8 scope host lo\       valid_lft forever preferred_lft forever
1: lo    inet6 ::1/128 scope host \       valid_lft forever preferred_lft forever
2: mgmt0    inet 172.30.113.10/24 brd 172.30.113.255 scope global mgmt0\       valid_lft forever preferred_lft forever
2: mgmt0    inet6 fe80::4d:acff:fe1e:710a/64 scope link \       valid_lft forever preferred_lft forever
3: data0    inet 192.168.141.31/24 brd 192.168.141.255 scope global data0\       valid_lft forever preferred_lft forever
4: docker0    inet 172.17.0.1/16 scope global docker0\       valid_lft forever preferred_lft forever
5: eth0    inet 172.28.42.32/24 brd 172.28.42.255 scope global eth0\       valid_lft forever preferred_lft forever
5: eth0    inet 172.28.42.33/24 scope global secondary eth0\       valid_lft forever preferred_lft forever
"""
NICS = ["data0", "docker0", "eth0", "lo", "mgmt0", "enp3s0"]


def test_lab_host_reads_like_the_gathered_facts():
    facts = parse_addresses(LAB, NICS)
    assert host_interfaces(facts) == {
        "lo": ["127.0.0.1", "::1"], "mgmt0": ["172.30.113.10"], "data0": ["192.168.141.31"], "docker0": ["172.17.0.1"],
        "eth0": ["172.28.42.32", "172.28.42.33"], "enp3s0": []}
    assert facts["eth0"]["ipv4"] == {"address": "172.28.42.32", "prefix": "24"}
    assert facts["mgmt0"]["ipv6"] == [{"address": "fe80::4d:acff:fe1e:710a", "prefix": "64", "scope": "link"}]
    got = resolve_host_address(facts, network="192.168.141.0/24", hostname="pd-p42")
    assert got == {"address": "192.168.141.31", "interface": "data0", "source": "network"}


def test_an_interface_without_an_address_is_listed_and_refused_by_name():
    with pytest.raises(ValueError) as err:
        resolve_host_address(parse_addresses(LAB, NICS), interface="enp3s0", hostname="pd-p42")
    assert "vllm_pd_interface=enp3s0 on host pd-p42 has 0 IPv4 addresses" in str(err.value)


def test_labels_vlans_point_to_point_and_global_ipv6():
    text = "\n".join([
        r"7: bond0.100@bond0    inet 10.0.30.5/24 brd 10.0.30.255 scope global bond0.100\       valid_lft forever",
        r"8: eth1    inet 10.1.0.5/24 scope global eth1\       valid_lft forever",
        r"8: eth1    inet 10.1.0.6/24 scope global secondary eth1:1\       valid_lft forever",
        r"9: ppp0    inet 10.64.64.64 peer 10.64.64.65/32 scope global ppp0\       valid_lft forever",
        r"10: rdma-0    inet6 2001:db8::5/64 scope global \       valid_lft forever",
    ])
    facts = parse_addresses(text)
    assert facts["interfaces"] == ["bond0.100", "eth1", "ppp0", "rdma-0"]
    assert facts["bond0.100"]["ipv4"]["address"] == "10.0.30.5"
    # a labelled address belongs to its device: the NIC vLLM, HCCL and Gloo bind
    assert facts["eth1"]["ipv4_secondaries"] == [{"address": "10.1.0.6", "prefix": "24"}]
    assert facts["ppp0"]["ipv4"] == {"address": "10.64.64.64", "prefix": "32"}
    assert facts["rdma_0"]["ipv6"][0] == {"address": "2001:db8::5", "prefix": "64", "scope": "global"}
    assert resolve_host_address(facts, host_ip="10.1.0.6")["interface"] == "eth1"
    assert resolve_host_address(facts, host_ip="2001:db8::5")["interface"] == "rdma-0"


def test_ip_missing_is_an_error_naming_the_host_and_the_fix():
    with pytest.raises(AddressReadError):
        parse_addresses("sh: 1: ip: not found\n", ["eth0"])
    with pytest.raises(AddressReadError) as err:
        parse_addresses("sh: 1: ip: not found\n", ["eth0"])
    fix = err.value.fix("npu-p01")
    assert "host npu-p01" in fix and "install iproute2" in fix and "ip: not found" in fix


def test_empty_output_gives_the_nics_only():
    assert parse_addresses("", ["eth0"]) == {"interfaces": ["eth0"], "eth0": {}}


# flags, labels, IPv6 states and point to point, as iproute2 6.x prints them
FLAGGED = "\n".join([
    r"2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global dynamic noprefixroute eth0\       valid_lft 86000sec",
    r"2: eth0    inet 10.0.0.6/24 scope global secondary eth0:1\       valid_lft forever preferred_lft forever",
    r"2: eth0    inet6 2001:db8::5/64 scope global dynamic mngtmpaddr \       valid_lft 86000sec preferred_lft 14000sec",
    r"2: eth0    inet6 2001:db8::9/64 scope global deprecated dynamic \       valid_lft 80sec preferred_lft 0sec",
    r"2: eth0    inet6 fe80::1/64 scope link tentative \       valid_lft forever preferred_lft forever",
    r"2: eth0    inet6 fe80::2/64 scope link dadfailed tentative \       valid_lft forever preferred_lft forever",
    r"5: ppp0    inet 10.64.64.64 peer 10.64.64.65/32 scope global ppp0\       valid_lft forever",
    r"7: veth0@if6    inet 172.17.0.2/16 brd 172.17.255.255 scope global veth0\       valid_lft forever",
])


def test_every_address_is_one_record_with_its_flags_and_label():
    recs = parse_ip_addr(FLAGGED)
    assert [(r["ifname"], r["address"], r["prefix"], r["scope"], r["flags"], r["label"]) for r in recs] == [
        ("eth0", "10.0.0.5", 24, "global", ["dynamic", "noprefixroute"], "eth0"),
        ("eth0", "10.0.0.6", 24, "global", ["secondary"], "eth0:1"),
        ("eth0", "2001:db8::5", 64, "global", ["dynamic", "mngtmpaddr"], None),
        ("eth0", "2001:db8::9", 64, "global", ["deprecated", "dynamic"], None),
        ("eth0", "fe80::1", 64, "link", ["tentative"], None),
        ("eth0", "fe80::2", 64, "link", ["dadfailed", "tentative"], None),
        ("ppp0", "10.64.64.64", 32, "global", [], "ppp0"),
        ("veth0", "172.17.0.2", 16, "global", [], "veth0")]
    assert recs[6]["peer"] == "10.64.64.65" and recs[0]["peer"] is None
    assert [r["family"] for r in recs] == ["inet", "inet", "inet6", "inet6", "inet6", "inet6", "inet", "inet"]


def test_the_deploy_and_the_doctor_see_the_same_addresses():
    """pd_ip_facts (VLLM_HOST_IP is resolved from it), pd_doctor and the start guard read one parser: the
    doctor once skipped a point-to-point address, which the deploy could pick."""
    facts = parse_addresses(FLAGGED)
    deploy = sorted(a for nic in host_interfaces(facts).values() for a in nic)
    assert deploy == sorted(r["address"] for r in parse_ip_addr(FLAGGED) if r["scope"] != "link")  # as pd_host_address
    assert resolve_host_address(facts, host_ip="10.64.64.64")["interface"] == "ppp0"
    # flags select nothing: a secondary (labelled) address is the NIC's, as before
    assert facts["eth0"]["ipv4"] == {"address": "10.0.0.5", "prefix": "24"}
    assert facts["eth0"]["ipv4_secondaries"] == [{"address": "10.0.0.6", "prefix": "24"}]
    assert [a["address"] for a in facts["eth0"]["ipv6"]] == ["2001:db8::5", "2001:db8::9", "fe80::1", "fe80::2"]
