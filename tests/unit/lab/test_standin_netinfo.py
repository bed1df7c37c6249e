"""get_ip() order [facts §1]; the auto-detection probes loopback here, never a real address."""
import logging
import warnings

from vllm_standin import netinfo

LOG = logging.getLogger("test")
LOOP = ("127.0.0.9", 80)


def test_vllm_host_ip_wins():
    assert netinfo.get_ip({"VLLM_HOST_IP": "10.1.2.3"}, LOG, LOOP, LOOP) == "10.1.2.3"


def test_host_ip_is_ignored_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert netinfo.get_ip({"HOST_IP": "10.9.9.9"}, LOG, LOOP) == "127.0.0.1"
    assert "HOST_IP is deprecated and ignored" in caplog.text


def test_empty_vllm_host_ip_falls_back_to_the_route_source():
    assert netinfo.get_ip({"VLLM_HOST_IP": ""}, LOG, LOOP) == "127.0.0.1"


def test_no_route_gives_wildcard_with_vllms_warning(monkeypatch):
    tried = []

    def unreachable(family, target):
        tried.append(target)
        raise OSError(101, "Network is unreachable")

    monkeypatch.setattr(netinfo, "_source_address", unreachable)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert netinfo.get_ip({}, LOG) == "0.0.0.0"
    assert tried == [netinfo.IPV4_PROBE, netinfo.IPV6_PROBE]  # IPv4 first, then IPv6
    assert "Failed to get the IP address, using 0.0.0.0 by default" in str(w[0].message)
