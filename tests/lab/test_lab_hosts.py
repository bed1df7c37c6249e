"""Fidelity of the lab hosts (lab/lab-hosts, playbooks/lab_up.yml) and the lab fixtures.

Needs podman; the ``lab`` fixture (conftest.py) brings the lab up. The last test takes the lab
down twice and brings it up again, so the lab is up when this file is done.
"""
import ipaddress
import json
import re
import subprocess
import time

from conftest import BIN, ROOT, Lab, lab_inventory

UDP_TRICK = ("python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
             "s.connect((\"8.8.8.8\", 80)); print(s.getsockname()[0])'")  # connect() sends no packet
TCP_PROBE = ("python3 -c 'import socket, sys; "
             "socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)' {} {}")
HTTP_GET = "python3 -c 'import urllib.request, sys; print(urllib.request.urlopen(sys.argv[1], timeout=3).status)' {}"


def listeners(lab, host, port):
    """ss's lines for PORT, with the owning processes (testinfra's host.socket does not name owners)."""
    return lab.run(host, f"ss -Htlnp 'sport = :{port}'").stdout.strip()


def port_free(lab, host, port):
    return not [a for a, p in lab.listening(host) if p == port]


def pairs(lab):
    return [(a, b) for hs in lab.clusters.values() for a in hs for b in hs if a != b]


def test_systemd_is_pid1_and_running(lab):
    for h in lab.hosts:
        host = lab.host(h)
        assert host.process.get(pid=1).comm == "systemd", h
        state = host.run("systemctl is-system-running").stdout.strip()
        assert state in ("running", "degraded"), (h, state)


def test_nics(lab):
    for h, v in lab.hosts.items():
        default = lab.ssh(h, "ip -o route show default").stdout.split()
        assert default[:5] == ["default", "via", v["mgmt_gw"], "dev", "mgmt0"], (h, default)
        host = lab.host(h)
        assert v["data_ip"] in host.interface("data0", "inet").addresses, h
        assert v["mgmt_ip"] in host.interface("mgmt0", "inet").addresses, h
        assert "UP" in host.interface("docker0").link[0]["flags"], h
        docker0 = lab.run(h, "ip -o -4 addr show dev docker0").stdout  # with the prefix: addresses has none
        assert " inet 172.17.0.1/16 " in docker0, (h, docker0)


def test_autodetection_picks_mgmt_ip(lab):
    """vLLM's get_ip() fallback (UDP connect to 8.8.8.8) must find the wrong NIC, as in the field."""
    for h, v in lab.hosts.items():
        assert lab.ssh(h, UDP_TRICK).stdout.strip() == v["mgmt_ip"], h


def test_peers_reach_data_ip_not_mgmt_ip(lab):
    for a, b in pairs(lab):
        assert lab.ssh(a, TCP_PROBE.format(lab.hosts[b]["data_ip"], 22), check=False).returncode == 0, (a, b)
        r = lab.ssh(a, TCP_PROBE.format(lab.hosts[b]["mgmt_ip"], 22), check=False)
        assert r.returncode != 0 and "unreachable" in r.stderr, (a, b, r.stderr[-300:])


def test_clusters_do_not_see_each_other(lab):
    """Only meaningful with several clusters (VLLM_PD_LAB_INVENTORY=<lab/gen-inventory output>)."""
    others = [(a, v["data_ip"]) for a in lab.hosts for v in lab.hosts.values()
              if v["cluster"] != lab.hosts[a]["cluster"]]
    for a, ip in others[:4]:
        assert lab.ssh(a, TCP_PROBE.format(ip, 22), check=False).returncode != 0, (a, ip)


def test_shm_and_tmp_are_tmpfs(lab):
    for h in lab.hosts:
        host = lab.host(h)
        assert host.mount_point("/dev/shm").filesystem == "tmpfs", h
        assert host.mount_point("/tmp").filesystem == "tmpfs", h
        size = host.run("df -k --output=size /dev/shm | tail -1").stdout.strip()
        assert size == str(256 * 1024), (h, size)


def test_ssh_login_is_a_logind_session(lab):
    """A process started from an SSH login lives in session-N.scope, not in ssh.service."""
    for h in lab.hosts:
        cg = lab.ssh(h, "grep name=systemd /proc/self/cgroup || cat /proc/self/cgroup").stdout
        assert "/user.slice/user-0.slice/session-" in cg and ".scope" in cg, (h, cg)


def test_conflict_service_answers_http_and_stops(lab):
    p, peer = lab.prefill[0], next(b for a, b in pairs(lab) if a == lab.prefill[0])
    try:
        for addr, from_peer in (("", True), ("127.0.0.1", False), (lab.hosts[p]["data_ip"], True)):
            lab.fixtures(p, ["conflict_service"], lab_conflict_service_port=28005, lab_conflict_service_address=addr)
            grafana = lab.host(p).service("grafana-server")
            assert grafana.is_running and grafana.is_enabled
            bound = listeners(lab, p, 28005)
            assert f"{addr or '0.0.0.0'}:28005 " in bound and "python3" in bound, bound
            local = f"http://{addr or '127.0.0.1'}:28005/"
            assert lab.ssh(p, HTTP_GET.format(local)).stdout.strip() == "200"
            remote = lab.ssh(peer, HTTP_GET.format(f"http://{lab.hosts[p]['data_ip']}:28005/"), check=False)
            assert (remote.stdout.strip() == "200") is from_peer, (addr, remote.stdout, remote.stderr[-200:])
        again = lab.fixtures(p, ["conflict_service"], lab_conflict_service_port=28005,
                             lab_conflict_service_address=lab.hosts[p]["data_ip"])
        assert lab.changed(again)[p] == 0
        lab.run(p, "systemctl stop grafana-server")
        assert port_free(lab, p, 28005)
    finally:
        lab.fixtures(p, state="absent")
    assert not lab.host(p).service("grafana-server").exists


def test_conflict_process_lives_in_session_scope(lab):
    p = lab.prefill[0]
    try:
        first = lab.fixtures(p, ["conflict_process"], lab_conflict_process_port=28006)
        assert lab.changed(first)[p] == 1
        pidfile = lab.host(p).file("/run/vllm-pd-lab/conflict-process-28006.pid")
        pid = pidfile.content_string.strip()
        assert f"pid={pid}," in listeners(lab, p, 28006)
        unit = lab.host(p).file(f"/proc/{pid}/cgroup").content_string
        assert "/session-" in unit and ".service" not in unit, unit
        again = lab.fixtures(p, ["conflict_process"], lab_conflict_process_port=28006)
        assert lab.changed(again)[p] == 0
        assert pidfile.content_string.strip() == pid
    finally:
        lab.fixtures(p, state="absent")
    assert port_free(lab, p, 28006)


def test_residue_held_and_removed(lab):
    d = lab.decode[0]
    files = ["/dev/shm/mooncake_seg_0", "/dev/shm/ascend_hccl_0", "/tmp/mooncake_meta_0.json",
             "/tmp/transfer_engine_0.log"]
    lab.run(d, "echo keep > /tmp/mooncake_not_ours")   # residue the fixture did not create: must stay
    try:
        assert lab.changed(lab.fixtures(d, ["residue"]))[d] == 1
        assert lab.changed(lab.fixtures(d, ["residue"]))[d] == 0
        host = lab.host(d)
        assert all(host.file(f).exists for f in files), [f for f in files if not host.file(f).exists]
        pid = host.file("/run/vllm-pd-lab/residue-holder.pid").content_string.strip()
        fds = lab.ssh(d, f"readlink /proc/{pid}/fd/*").stdout.split()   # open files: not a testinfra read
        assert "/dev/shm/mooncake_seg_0" in fds and "/tmp/mooncake_meta_0.json" in fds, fds
        assert "/dev/shm/ascend_hccl_0" not in fds
        assert "/dev/shm/mooncake_seg_0" in host.file(f"/proc/{pid}/maps").content_string
        removed = lab.fixtures(d, state="absent")
        assert lab.changed(removed)[d] == 1
        assert lab.changed(lab.fixtures(d, state="absent"))[d] == 0
        assert not any(host.file(f).exists for f in files), [f for f in files if host.file(f).exists]
        assert not host.process.filter(pid=int(pid)), pid
        assert host.file("/tmp/mooncake_not_ours").content_string.strip() == "keep"
    finally:
        lab.run(d, "rm -f /tmp/mooncake_not_ours")
        lab.fixtures(d, state="absent")


def test_lab_up_is_idempotent(lab):
    r = lab.up()
    assert set(lab.changed(r).values()) == {0}, r.stdout[-2000:]


def test_restart_reapplies_network_settings(lab):
    d = lab.decode[0]
    peer = next(b for a, b in pairs(lab) if a == d)

    def macs():
        return subprocess.run(["podman", "inspect", d, "--format",
                               "{{range $n, $v := .NetworkSettings.Networks}}{{$n}}={{$v.MacAddress}} {{end}}"],
                              check=True, capture_output=True, text=True).stdout.split()

    before = macs()
    # the peer's neighbour cache now holds D's data0 MAC: one drawn anew at the restart would leave D
    # unreachable from the peer for up to a minute, which a real NIC never does
    assert lab.ssh(peer, TCP_PROBE.format(lab.hosts[d]["data_ip"], 22), check=False).returncode == 0
    subprocess.run(["podman", "restart", "-t", "5", d], check=True, capture_output=True)
    lab.forget(d)
    assert len(before) == 3 and macs() == before  # mgmt, data and NPU networks
    # every NPU has its address again at boot, from hccn.conf as the driver does (lab-npu.service), and
    # answers the peer's NPU of the same index, before anything else runs (sshd on data0 is up in seconds)
    deadline = time.monotonic() + 60
    while lab.ssh(d, "true", check=False).returncode != 0:
        assert time.monotonic() < deadline, f"{d}: no SSH on data0 60 s after the restart"
        time.sleep(1)
    conf = dict(line.split("=", 1) for line in lab.ssh(d, "cat /etc/hccn.conf").stdout.split())
    npus = {int(k[len("address_"):]): v for k, v in conf.items() if k.startswith("address_")}
    assert len(npus) == 8, conf
    held = lab.ssh(d, "ip -o -4 addr show dev npu0").stdout
    assert [n for n, a in npus.items() if f" inet {a}/" not in held] == [], held
    hccn = "/usr/local/Ascend/driver/tools/hccn_tool"
    pings = lab.ssh(peer, "; ".join(f"{hccn} -i {n} -ping -g address {a} pkt 1 >/dev/null || echo {n}"
                                    for n, a in npus.items()))
    assert pings.stdout.split() == [], f"NPUs of {d} unreachable from {peer}: {pings.stdout}"
    r = lab.up()
    # the hosts' NICs are made again after the restart; nothing else (the NPU layer came back at boot)
    changed = [t.split(" (")[0] for t in re.findall(r"^TASK \[(.*)\] \**\nchanged:", r.stdout, re.M)]
    assert changed == ["Lab hosts up"], r.stdout[-2000:]
    assert "dev mgmt0" in lab.ssh(d, "ip route show default").stdout
    assert " 172.17.0.1/16 " in lab.ssh(d, "ip -o addr show dev docker0").stdout
    assert lab.ssh(d, UDP_TRICK).stdout.strip() == lab.hosts[d]["mgmt_ip"]
    r = lab.ssh(peer, TCP_PROBE.format(lab.hosts[d]["data_ip"], 22), check=False)
    assert r.returncode == 0, r.stderr[-300:]
    assert lab.ssh(d, TCP_PROBE.format(lab.hosts[peer]["mgmt_ip"], 22), check=False).returncode != 0


def test_lab_down_twice_then_up(lab):
    names = list(lab.hosts)
    first = lab.playbook("playbooks/lab_down.yml")
    lab.forget()
    changed = [t.split(" (")[0] for t in re.findall(r"^TASK \[(.*)\] \**\nchanged:", first.stdout, re.M)]
    assert changed == ["Lab hosts down", "Remove the lab NPU networks"], first.stdout[-2000:]
    second = lab.playbook("playbooks/lab_down.yml")
    assert lab.changed(second)["localhost"] == 0
    left = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}", "--filter", "label=vllm-pd-lab=1"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert not set(names) & set(left), left
    nets = subprocess.run(["podman", "network", "ls", "--format", "{{.Name}}"], capture_output=True, text=True,
                          check=True).stdout.split()
    assert not [n for n in nets if n.startswith("vllm-pd-") and any(n.endswith(h) for h in names)], nets
    assert not [n for n in nets if n in {f"vllm-pd-npu-{c}" for c in lab.clusters}], nets
    t = time.monotonic()
    lab.up()
    print(f"lab up from nothing (image present): {time.monotonic() - t:.1f}s")
    for h in names:
        assert lab.host(h).run("systemctl is-system-running").stdout.strip() in ("running", "degraded")


def test_lab_inventory_writes_sizes_group_and_host_vars(tmp_path):
    """conftest.lab_inventory, what every own_lab builds: no host is started."""
    inv = lab_inventory(tmp_path / "inv", 5, clusters=2, prefill=2, runtime="container",
                        group_vars={"lab6": {"vllm_pd_kv_port": 30000}}, host_vars={"pd-d5": {"decode_x": [1, "a b"]}})
    lab = Lab(inv)
    assert lab.prefill == ["pd-p5-1", "pd-p5-2", "pd-p6-1", "pd-p6-2"] and lab.decode == ["pd-d5", "pd-d6"]
    assert (inv / "host_vars").is_dir()

    def hostvars(host):
        return json.loads(subprocess.run([str(BIN / "ansible-inventory"), "-i", str(inv), "--host", host],
                                         capture_output=True, text=True, check=True).stdout)
    assert hostvars("pd-p6-1")["vllm_pd_kv_port"] == 30000 and hostvars("pd-p5-1")["vllm_pd_kv_port"] == 28002
    assert hostvars("pd-d5")["decode_x"] == [1, "a b"] and hostvars("pd-d5")["vllm_pd_runtime"] == "container"


def test_gen_inventory_matches_lab_and_scales(tmp_path):
    one, eight = tmp_path / "one", tmp_path / "eight"
    subprocess.run([str(ROOT / "lab" / "gen-inventory"), "--clusters", "1", "--out", str(one)], check=True)
    assert (one / "hosts.yml").read_text() == (ROOT / "inventory" / "lab" / "hosts.yml").read_text()
    subprocess.run([str(ROOT / "lab" / "gen-inventory"), "--clusters", "8", "--out", str(eight)], check=True)
    lab8 = Lab(eight)
    assert len(lab8.hosts) == 16 and len(lab8.clusters) == 8 and len(lab8.proxy) == 8
    for cluster, hs in lab8.clusters.items():
        assert len(hs) == 2 and {lab8.hosts[h]["cluster"] for h in hs} == {cluster}
    addrs = [v[k] for v in lab8.hosts.values() for k in ("data_ip", "mgmt_ip")]
    assert len(set(addrs)) == 32
    docker0 = ipaddress.ip_network("172.17.0.0/16")
    assert not [a for a in addrs if ipaddress.ip_address(a) in docker0]
    inv = json.loads(subprocess.run([str(BIN / "ansible-inventory"), "-i", str(eight), "--host", "pd-d8"],
                                    capture_output=True, text=True, check=True).stdout)
    assert inv["ansible_ssh_private_key_file"] == str(ROOT / ".cache" / "lab" / "id_ed25519")
    assert inv["vllm_pd_network"] == inv["lab_data_subnet"] == "192.168.107.0/24"
    r = subprocess.run([str(ROOT / "lab" / "gen-inventory"), "--clusters", "300", "--out", str(tmp_path / "x")],
                       capture_output=True, text=True, check=False)
    assert r.returncode != 0 and "address plan" in r.stderr
