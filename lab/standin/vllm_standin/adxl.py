"""AscendDirectTransport's listen port per NPU [facts §2f]: random in
[base + phys*100, base + (phys+1)*100], probed, closed, then bound again (the race window),
up to 500 tries. The socket stays open for the life of the process."""
import random
import socket

TRIES = 500


def _bind(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("0.0.0.0", port))
    except OSError:
        s.close()
        return None
    return s


def listen_ports(phys_ids, base_port, log, rng=random):
    held = []
    for phys in phys_ids:
        low, high = base_port + phys * 100, base_port + (phys + 1) * 100
        log.info("Find available between %d and %d", low, high)
        for _unused in range(TRIES):
            port = rng.randint(low, high)
            probe = _bind(port)
            if probe is None:
                continue
            probe.close()
            sock = _bind(port)
            if sock is None:
                continue
            sock.listen(16)
            held.append(sock)
            break
        else:
            raise RuntimeError(f"AscendDirectTransport: no free port between {low} and {high} for device {phys}")
    return held
