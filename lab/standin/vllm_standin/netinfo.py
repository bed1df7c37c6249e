"""get_ip() in vLLM's order [facts §1]."""
import socket
import warnings

IPV4_PROBE = ("8.8.8.8", 80)
IPV6_PROBE = ("2001:4860:4860::8888", 80)


def _source_address(family, target):
    # A UDP connect only picks the route's source address; no packet is sent [facts §1].
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect(target)
        return s.getsockname()[0]


def get_ip(env, log, ipv4_probe=IPV4_PROBE, ipv6_probe=IPV6_PROBE):
    host_ip = env.get("VLLM_HOST_IP", "")
    if "HOST_IP" in env and "VLLM_HOST_IP" not in env:
        log.warning("The environment variable HOST_IP is deprecated and ignored, as it is often used "
                    "by Docker and other software to interact with the container's network stack. "
                    "Please use VLLM_HOST_IP instead to set the IP address for vLLM processes to "
                    "communicate with each other.")
    if host_ip:
        return host_ip
    for family, target in ((socket.AF_INET, ipv4_probe), (socket.AF_INET6, ipv6_probe)):
        try:
            return _source_address(family, target)
        except OSError:
            continue
    warnings.warn("Failed to get the IP address, using 0.0.0.0 by default. The value can be set "
                  "by the environment variable VLLM_HOST_IP or HOST_IP.", stacklevel=2)
    return "0.0.0.0"
