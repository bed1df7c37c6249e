# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_pd.ascend.plugins.filter.pd_host_address import (
    FilterModule, host_interfaces, resolve_host_address)

# What `setup: gather_subset=network` returns on a lab host: mgmt0 holds the
# default route, data0 the inter-node network, docker0 the same address everywhere.
FACTS = {
    "interfaces": ["lo", "mgmt0", "data0", "docker0"],
    "lo": {"ipv4": {"address": "127.0.0.1"}, "ipv6": [{"address": "::1", "scope": "host"}]},
    "mgmt0": {"ipv4": {"address": "172.30.31.10"}, "ipv6": [{"address": "fe80::1", "scope": "link"}]},
    "data0": {"ipv4": {"address": "192.168.100.31"}},
    "docker0": {"ipv4": {"address": "172.17.0.1"}},
    "default_ipv4": {"address": "172.30.31.10", "interface": "mgmt0"},
}


def test_network_picks_the_single_address_inside_the_cidr_not_the_default_route():
    got = resolve_host_address(FACTS, network="192.168.100.0/24", hostname="pd-p1")
    assert got == {"address": "192.168.100.31", "interface": "data0", "source": "network"}


def test_explicit_host_ip_wins_and_must_be_local():
    assert resolve_host_address(FACTS, host_ip="192.168.100.31", network="10.0.0.0/8")["interface"] == "data0"
    with pytest.raises(ValueError) as err:
        resolve_host_address(FACTS, host_ip="10.0.30.10", hostname="pd-p1")
    msg = str(err.value)
    assert "vllm_pd_host_ip=10.0.30.10" in msg and "pd-p1" in msg and "data0=192.168.100.31" in msg


def test_no_match_lists_the_hosts_addresses():
    with pytest.raises(ValueError) as err:
        resolve_host_address(FACTS, network="10.0.30.0/24", hostname="pd-d1")
    assert "no address inside vllm_pd_network=10.0.30.0/24" in str(err.value)
    assert "mgmt0=172.30.31.10" in str(err.value)


def test_several_matches_is_an_error_naming_them():
    with pytest.raises(ValueError) as err:
        resolve_host_address(FACTS, network="172.16.0.0/12", hostname="pd-d1")
    assert "2 addresses" in str(err.value)
    assert "172.17.0.1 on docker0" in str(err.value) and "172.30.31.10 on mgmt0" in str(err.value)


def test_interface_and_refusal_to_guess():
    assert resolve_host_address(FACTS, interface="data0")["address"] == "192.168.100.31"
    with pytest.raises(ValueError, match="does not exist"):
        resolve_host_address(FACTS, interface="eth9")
    with pytest.raises(ValueError, match="Auto-detection"):
        resolve_host_address(FACTS, hostname="pd-p1")


def test_bad_cidr_and_filter_wrapper():
    with pytest.raises(AnsibleFilterError, match="not a CIDR"):
        FilterModule().filters()["pd_host_address"](FACTS, network="192.168.100.0/33")


def test_link_local_v6_is_ignored_and_secondaries_count():
    facts = dict(FACTS)
    facts["data0"] = {"ipv4": {"address": "192.168.100.31"}, "ipv4_secondaries": [{"address": "192.168.100.99"}]}
    assert "fe80::1" not in host_interfaces(facts)["mgmt0"]
    with pytest.raises(ValueError, match="2 addresses"):
        resolve_host_address(facts, network="192.168.100.0/24")
