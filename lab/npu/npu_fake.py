#!/usr/bin/python3 -S
"""The lab's NPU layer: fake `hccn_tool` and `npu-smi`, and the files the NPU checks read, all driven
by one state file per host (docs/design.md "Lab NPU layer"; formats and exit codes are those of
shared/docs/ascend-node-facts.md §1-§4).

  npu_fake.py hccn_tool ARGS...     (installed as /usr/local/Ascend/driver/tools/hccn_tool)
  npu_fake.py npu-smi ARGS...       (installed as /usr/local/bin/npu-smi)
  npu_fake.py init COUNT FIRST_IP NETMASK   write a healthy state (unless present) and render
  npu_fake.py set NPU KEY VALUE     change one NPU's field (fixtures); KEY=global for host fields
  npu_fake.py reset                 healthy state again (addresses kept; fixture processes ended)
  npu_fake.py render                write /etc/hccn.conf and the version files from the state
  npu_fake.py boot                  what the driver does at boot: every NPU takes address_N/netmask_N
                                    of /etc/hccn.conf, on the NIC npu0 (unit lab-npu.service)

Lab only: never on a real NPU host (the state file marks a lab host).
"""
import json
import os
import sys

STATE = os.environ.get("VLLM_PD_LAB_NPU_STATE", "/etc/vllm-pd-lab/npu.json")
ROOT = os.environ.get("VLLM_PD_LAB_NPU_ROOT", "/")
PROCS = os.path.join(ROOT, "run/vllm-pd-lab/npu-procs")
# Pre-rendered answers of the read-only per-NPU queries, for the sh fast path (hccn_tool.sh): a
# real hccn_tool is a C binary; a Python start per query would make the fake 10x slower than it.
CACHE = "/var/lib/vllm-pd-lab/npu-out"
CACHED = ("-link", "-net_health", "-ip", "-tls", "-netdetect", "-mtu", "-lldp")
HEALTH = ("OK", "Warning", "Alarm", "Critical", "UNKNOWN")
NET_HEALTH = ("Success", "Socket fail", "Receive timeout", "Unreachable", "Time exceeded", "Fault",
              "Init", "Thread error", "Detect ip set", "Unknown")
PING_TIMEOUT = 0.3     # seconds per packet
PROBE_PORT = 7         # TCP echo port: a RST (refused) from the peer's kernel proves the path


def path(p):
    return os.path.join(ROOT, p.lstrip("/"))


def load():
    with open(STATE) as f:
        return json.load(f)


def commit(before, state):
    """Save STATE when it differs from the JSON text BEFORE (CHANGED tells Ansible), then render its files."""
    if json.dumps(state, sort_keys=True) != before:
        save(state)
        print("CHANGED")
    render(state)


def save(state):
    tmp = STATE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(tmp, STATE)


# the stand-in's release table (lab/install-standin) and its installed vllm-ascend: a fresh NPU layer has the CANN
# that release is built with, as a real host installed for it would
STANDIN_TABLE = "/opt/vllm-lab/vllm_standin/releases.py"
DEFAULT_CANN = "8.5.1"


def release_cann():
    try:
        import glob
        import importlib.metadata
        import importlib.util
        spec = importlib.util.spec_from_file_location("standin_releases", STANDIN_TABLE)
        table = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(table)
        # started with -S (no site): the stand-in's Python's package directories by name
        dirs = glob.glob("/usr/local/lib/python3*/dist-packages") + glob.glob("/usr/lib/python3*/dist-packages")
        dist = next(importlib.metadata.distributions(name="vllm-ascend", path=dirs))
        return table.cann_for(dist.version) or DEFAULT_CANN
    except Exception:  # noqa: BLE001 - no stand-in (yet), or not installed as a release: the lab default
        return DEFAULT_CANN


def default_state(count, first_ip, netmask):
    a, b, c, d = (int(x) for x in first_ip.split("."))
    npus = [{"id": n, "ip": "%d.%d.%d.%d" % (a, b, c, d + n), "netmask": netmask, "conf_ip": None,
             "link": "UP", "net_health": "Success", "tls": 0, "health": "OK", "processes": []}
            for n in range(count)]
    return {"version": 1, "chip": "910B3" if count <= 8 else "Ascend910", "npu_smi_version": "25.2.0",
            "driver_version": "25.2.0", "cann_version": release_cann(), "npus": npus}


# --- files ---------------------------------------------------------------------------------------
def render(state):
    lines = []
    for n in state["npus"]:
        i = n["id"]
        lines += ["address_%d=%s" % (i, n["conf_ip"] or n["ip"]), "netmask_%d=%s" % (i, n["netmask"]),
                  "netdetect_%d=%s" % (i, gateway(n)), "send_arp_status_%d=1" % i,
                  "tls_enable_%d=%d" % (i, n["tls"])]
    files = {
        "/etc/hccn.conf": "\n".join(lines) + "\n",
        "/usr/local/Ascend/driver/version.info":
            "Version=%s\nascendhal_version=7.35.19\naicpu_version=1.0\ntdt_version=1.0\nlog_version=1.0\n"
            "prof_version=2.0\ndvppkernels_version=1.1\ntsfw_version=1.0\nInnerversion=V100R001C25SPC001B220\n"
            "compatible_version=[V100R001C13],[V100R001C15],[V100R001C17],[V100R001C18],[V100R001C19],"
            "[V100R001C20],[V100R001C21],[V100R001C23],[V100R001C25]\ncompatible_version_fw=[7.0.0,7.7.99]\n"
            "package_version=%s\n" % (state["driver_version"], state["driver_version"]),
        "/etc/ascend_install.info":
            "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nDriver_Install_Type=full\n"
            "Driver_Install_Path_Param=/usr/local/Ascend\nDriver_Install_For_All=no\n"
            "Driver_Install_Mode=normal\nDriver_Install_Status=complete\n",
        "/usr/local/Ascend/ascend-toolkit/latest/%s-linux/ascend_toolkit_install.info" % os.uname().machine:
            "package_name=Ascend-cann-toolkit\nversion=%s\ninnerversion=V100R001C25SPC001B220\n"
            "compatible_version=[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C23]\n"
            "arch=%s\nos=linux\npath=/usr/local/Ascend/ascend-toolkit/%s/%s-linux\n"
            % (state["cann_version"], os.uname().machine, state["cann_version"], os.uname().machine),
    }
    answers = {}
    for n in state["npus"]:
        for cmd in CACHED:
            out = _capture(hccn_tool, ["-i", str(n["id"]), cmd, "-g"], state)
            if out is not None:
                answers["%d%s" % (n["id"], cmd)] = out
    files.update((os.path.join(CACHE, name), text) for name, text in answers.items())
    os.makedirs(path(CACHE), exist_ok=True)
    for p, text in files.items():
        replace_file(path(p), text)
    # an answer that is now an error goes to the Python path; a file of another render is left alone
    for name in os.listdir(path(CACHE)):
        if name not in answers and not name.startswith(".") and name.lstrip("0123456789").startswith("-"):
            try:
                os.remove(os.path.join(path(CACHE), name))
            except FileNotFoundError:
                pass


def replace_file(p, text):
    """Write P whole or not at all, even while another render writes it too: readers (hccn_tool.sh's
    cat, the NPU checks) see the old file or the new one, never an empty or half-written one."""
    import tempfile  # pylint: disable=import-outside-toplevel  # here: the fake's queries start faster without it
    os.makedirs(os.path.dirname(p), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(p), prefix=".render-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    except BaseException:
        os.unlink(tmp)
        raise


def _capture(fn, argv, state):
    """stdout of a successful fn(argv, state), else None (errors keep the Python path)."""
    import io  # pylint: disable=import-outside-toplevel
    old, sys.stdout = sys.stdout, io.StringIO()
    try:
        rc = fn(argv, state)
        text = sys.stdout.getvalue()
    finally:
        sys.stdout = old
    return text if rc == 0 else None


def gateway(n):
    return ".".join(n["ip"].split(".")[:3] + ["1"])


# --- hccn_tool -----------------------------------------------------------------------------------
def fail(code, msg, out=sys.stderr):
    out.write(msg + "\n")
    return code


def hccn_tool(argv, state):
    npus = {n["id"]: n for n in state["npus"]}
    if len(argv) < 2 or argv[0] != "-i":
        return fail(1, "Command execute failed!")
    try:
        dev = int(argv[1])
    except ValueError:
        return fail(4, "Get invalid device id.")
    if dev < 0 or dev > 15:
        return fail(4, "Get invalid device id.")
    if dev not in npus:
        return fail(4, "The device is not exist!")
    n, rest = npus[dev], argv[2:]
    if len(rest) < 2 or rest[1] != "-g":
        return fail(1, "Command execute failed!")
    cmd, args = rest[0], rest[2:]
    if cmd == "-link":
        print("link status: %s" % n["link"])
    elif cmd == "-ip":
        if not n["ip"]:
            return fail(13, "Get ipconf failed, because no ip was preset there!")
        print("ipaddr:%s\nnetmask:%s" % (n["ip"], n["netmask"]))
    elif cmd == "-net_health":
        print("net health status: %s" % n["net_health"])
    elif cmd == "-tls":
        print("dev_id:%d, tls switch[%d](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), "
              "tls alarm time threshold[60]days" % (dev, n["tls"]))
    elif cmd == "-gateway":
        return fail(2, "Get gateway failed, because no gateway was preset there!")
    elif cmd == "-netdetect":
        print("netdetect addr: %s" % gateway(n))
    elif cmd == "-mtu":
        print("mtu:9000")
    elif cmd == "-lldp":
        print("Chassis ID TLV\n        MAC: 00:00:5e:00:53:%02x\nPort ID TLV\n        Ifname: 400GE1/1/%d:2\n"
              "System Description TLV\n        Versatile Routing Platform Software\nMaximum Frame Size TLV\n"
              "        9216\nEnd of LLDPDU TLV" % (dev, dev + 1))
    elif cmd == "-ping":
        return ping(dev, n, args)
    else:
        return fail(1, "Command execute failed!")
    return 0


def route_ok(addr, n):
    """Lab route guard inside the fake: the peer must be on the NPU network (the /24 of the NPU's own
    address, directly on the NIC that holds it: no gateway)."""
    # only ping needs it: a fast start for the read-only queries
    import subprocess  # pylint: disable=import-outside-toplevel
    if addr.split(".")[:3] != n["ip"].split(".")[:3]:
        return False
    r = subprocess.run(["ip", "-o", "route", "get", addr, "from", n["ip"]], capture_output=True, text=True, check=False)
    return r.returncode == 0 and " via " not in r.stdout and " dev " in r.stdout


def ping(dev, n, args):
    import socket  # pylint: disable=import-outside-toplevel
    if len(args) < 2 or args[0] != "address":
        return fail(1, "Command execute failed!")
    peer, count = args[1], 3
    if len(args) >= 4 and args[2] == "pkt":
        count = int(args[3])
    try:
        socket.inet_aton(peer)
    except OSError:
        return fail(1, "Command execute failed!")
    if not route_ok(peer, n):
        return fail(1, "Command execute failed!\nlab route guard: %s is not on the lab NPU network" % peer)
    print("device %d PING %s" % (dev, peer))
    got = 0
    for seq in range(count):
        ok, ms = probe(n, peer) if n["link"] == "UP" else (False, 0.0)
        if ok:
            got += 1
            print("recv seq=%d,time=%fms" % (seq, ms))
        else:
            print("recv time out seq=%d" % seq)
    print("%d packets transmitted, %d received, %.2f%% packet loss" % (count, got, 100.0 * (count - got) / count))
    return 0 if got == count else fail(1, "Command execute failed!")


def probe(n, peer):
    """One TCP SYN from the NPU's own address: accepted or refused (RST) = the peer answered."""
    import socket  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(PING_TIMEOUT)
    t0 = time.monotonic()
    try:
        s.bind((n["ip"], 0))
        s.connect((peer, PROBE_PORT))
        ok = True
    except ConnectionRefusedError:
        ok = True
    except OSError:
        ok = False
    finally:
        s.close()
    return ok, (time.monotonic() - t0) * 1000


# --- boot ----------------------------------------------------------------------------------------
def read_hccn_conf():
    """{npu id: {key: value}} of /etc/hccn.conf (`<key>_<phyid>=<value>`, ascend-node-facts.md §2)."""
    conf = {}
    with open(path("/etc/hccn.conf")) as f:
        for line in f:
            key, sep, value = line.strip().partition("=")
            name, npu = key.rsplit("_", 1) if "_" in key else ("", "")
            if sep and name and npu.isdigit():
                conf.setdefault(int(npu), {})[name] = value
    return conf


def boot(state, ip=None):
    """The driver's boot: each NPU's port comes up with address_N/netmask_N of hccn.conf, so the NPU
    holds what the file says (a hccn_conf_mismatch heals, as on a rebooted host). In the lab the NPU
    ports are the addresses of one NIC (named npu0 by npu-lab): podman restores only the first at a
    container restart, this restores them all. IP runs `ip` (tests pass their own)."""
    import subprocess  # pylint: disable=import-outside-toplevel
    ip = ip or (lambda *a: subprocess.run(("ip",) + a, capture_output=True, text=True, check=False))
    conf = read_hccn_conf()
    before = json.dumps(state, sort_keys=True)
    known = [n["ip"] for n in state["npus"]]
    for n in state["npus"]:
        c = conf.get(n["id"], {})
        if c.get("address"):
            n["ip"], n["netmask"], n["conf_ip"] = c["address"], c.get("netmask", n["netmask"]), None
    addrs = ip("-o", "-4", "addr", "show").stdout.split("\n")
    held = {}
    for line in addrs:
        f = line.split()
        if len(f) >= 4 and f[2] == "inet":
            held.setdefault(f[1], set()).add(f[3].split("/")[0])
    dev = next((d for d, a in held.items() if a & set(known + [n["ip"] for n in state["npus"]])
                and d not in ("lo", "mgmt0", "data0", "docker0")), None)
    if dev is None:
        sys.stderr.write("npu_fake boot: no NIC holds an NPU address (%s); run lab/npu/npu-lab up\n" % known[0])
        return 1
    if ip("link", "show", "npu0").returncode != 0:
        ip("link", "property", "add", "dev", dev, "altname", "npu0")
    for n in state["npus"]:
        if n["ip"] not in held[dev]:
            bits = sum(bin(int(x)).count("1") for x in n["netmask"].split("."))
            r = ip("addr", "add", "%s/%d" % (n["ip"], bits), "dev", dev)
            if r.returncode != 0:
                sys.stderr.write("npu_fake boot: NPU %d: ip addr add %s failed: %s" % (n["id"], n["ip"], r.stderr))
                return 1
            print("NPU %d: %s on %s" % (n["id"], n["ip"], dev))
    commit(before, state)
    return 0


# --- npu-smi -------------------------------------------------------------------------------------
def live_processes(state):
    """[(phy_id, pid, name, mem)]: the state's processes plus those engines registered in PROCS."""
    out = [(n["id"], int(p["pid"]), p.get("name", ""), int(p.get("mem", 0)))
           for n in state["npus"] for p in n["processes"]]
    try:
        names = os.listdir(PROCS)
    except OSError:
        names = []
    for name in names:
        try:
            pid = int(name)
            os.kill(pid, 0)
            with open(os.path.join(PROCS, name)) as f:
                devs = [int(x) for x in f.read().split(",") if x.strip()]
        except (ValueError, OSError):
            continue
        out += [(d, pid, "", 3072) for d in devs]
    return [p for p in out if pid_alive(p[1])]


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except OSError:
        return True


SEP = "+===========================+===============+====================================================+"
THIN = "+---------------------------+---------------+----------------------------------------------------+"


def row(a, b, c):
    return "| %-26s| %-14s| %-51s|" % (a, b, c)


def npu_smi_info(state):
    """A2 layout for up to 8 NPUs; A3 layout (8 NPU ids x 2 chips, Phy-ID column) for 16 [facts §3]."""
    a3 = len(state["npus"]) > 8
    v = state["npu_smi_version"]
    lines = ["+------------------------------------------------------------------------------------------------+",
             ("| npu-smi %-24s Version: %s" % (v, v)).ljust(97) + "|", THIN,
             row("NPU   Name", "Health", "Power(W)    Temp(C)           Hugepages-Usage(page)"),
             row("Chip  Phy-ID" if a3 else "Chip", "Bus-Id", "AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)"), SEP]
    procs = live_processes(state)
    for n in state["npus"]:
        i = n["id"]
        npu, chip = (i // 2, i % 2) if a3 else (i, 0)
        used = sum(p[3] for p in procs if p[0] == i) + 3408
        if chip == 0:
            # A3: one Health per NPU row for both chips: the worse of the two
            pair = [x["health"] for x in state["npus"] if (x["id"] // 2 if a3 else x["id"]) == npu]
            health = max(pair, key=HEALTH.index)
            lines.append(row("%-6d%s" % (npu, state["chip"]), health, "97.9        34                0    / 0"))
        chip_col = "%-6d%d" % (chip, i) if a3 else "%d" % chip
        lines.append(row(chip_col, "0000:%02X:00.0" % (0xC1 + i), "0           0    / 0          %-5d/ 65536" % used))
        if not a3 or chip == 1:
            lines.append(SEP)
    lines += [THIN, "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |",
              SEP]
    for n in state["npus"]:
        i = n["id"]
        npu, chip = (i // 2, i % 2) if a3 else (i, 0)
        mine = [p for p in procs if p[0] == i]
        if not mine:
            if chip == 0 or not a3:
                if not any(p[0] in ((i, i + 1) if a3 else (i,)) for p in procs):
                    lines.append("| %-95s|" % ("No running processes found in NPU %d" % npu))
                    lines.append(SEP)
            continue
        for p in mine:
            lines.append("| %-8d%-18d| %-14d| %-25s| %-24d|" % (npu, chip, p[1], p[2], p[3]))
        lines.append(SEP)
    print("\n".join(lines))
    return 0


def npu_smi(argv, state):
    a3 = len(state["npus"]) > 8
    ids = sorted({(n["id"] // 2 if a3 else n["id"]) for n in state["npus"]})
    if argv == ["info"]:
        return npu_smi_info(state)
    if argv == ["info", "-l"]:
        print("\tTotal Count                    : %d\n" % len(ids))
        for i in ids:
            print("\tNPU ID                         : %d\n\tProduct Name                   : IT21PDDA01\n"
                  "\tSerial Number                  : 102400000%03d\n\tChip Count                     : %d\n"
                  % (i, i, 2 if a3 else 1))
        return 0
    if len(argv) >= 5 and argv[:3] == ["info", "-t", "health"] and argv[3] == "-i":
        try:
            npu = int(argv[4])
            chip = int(argv[6]) if len(argv) >= 7 and argv[5] == "-c" else 0
        except ValueError:
            return fail(1, "Invalid parameter.", sys.stdout)
        phy = npu * 2 + chip if a3 else npu
        n = next((x for x in state["npus"] if x["id"] == phy), None)
        if n is None or npu not in ids:
            return fail(251, "The npu id is invalid.", sys.stdout)
        print("\tHealth Status                  : %s\n\tError Code                     : %s\n"
              "\tError Information              : %s" % (n["health"], "NA" if n["health"] == "OK" else "80E18005",
                                                         "NA" if n["health"] == "OK" else "lab fault"))
        return 0
    return fail(1, "Invalid parameter.", sys.stdout)


# --- state edits ---------------------------------------------------------------------------------
FIELDS = {"link": ("UP", "DOWN"), "net_health": NET_HEALTH, "health": HEALTH, "tls": ("0", "1")}


def set_field(state, npu, key, value):
    if npu == "global":
        if key not in ("driver_version", "cann_version", "npu_smi_version", "chip"):
            raise SystemExit("npu_fake set: unknown host field %s" % key)
        state[key] = value
        return
    n = next((x for x in state["npus"] if x["id"] == int(npu)), None)
    if n is None:
        raise SystemExit("npu_fake set: NPU %s not on this host (0..%d)" % (npu, len(state["npus"]) - 1))
    if key in FIELDS:
        if value not in FIELDS[key]:
            raise SystemExit("npu_fake set: %s must be one of %s" % (key, ", ".join(FIELDS[key])))
        n[key] = int(value) if key == "tls" else value
    elif key == "conf_ip":
        n[key] = value or None
    elif key == "processes":
        n[key] = json.loads(value)
    else:
        raise SystemExit("npu_fake set: unknown NPU field %s" % key)


def main(argv):
    tool = os.path.basename(argv[0]) if argv else ""
    if tool in ("hccn_tool", "npu-smi"):
        argv = argv[1:]
    elif argv:
        tool, argv = argv[0], argv[1:]
    if tool == "init":
        if not os.path.exists(STATE):
            os.makedirs(os.path.dirname(STATE), exist_ok=True)
            save(default_state(int(argv[0]), argv[1], argv[2]))
            print("CHANGED state")
        render(load())
        return 0
    try:
        state = load()
    except (OSError, ValueError):
        if tool == "npu-smi":
            return fail(1, "dcmi module initialize failed. ret is -8005", sys.stdout)
        return fail(1, "Command execute failed!")
    if tool == "hccn_tool":
        return hccn_tool(argv, state)
    if tool == "npu-smi":
        return npu_smi(argv, state)
    if tool == "set":
        before = json.dumps(state, sort_keys=True)
        for i in range(0, len(argv), 3):
            set_field(state, argv[i], argv[i + 1], argv[i + 2])
        commit(before, state)
        return 0
    if tool == "reset":
        # undo the fixtures: healthy NPUs, addresses kept; ends the processes `set` recorded as busy
        before = json.dumps(state, sort_keys=True)
        fresh = default_state(len(state["npus"]), state["npus"][0]["ip"], state["npus"][0]["netmask"])
        for n in state["npus"]:
            for p in n["processes"]:
                if p.get("lab_fixture"):
                    try:
                        os.kill(int(p["pid"]), 15)
                    except OSError:
                        pass
        commit(before, fresh)
        return 0
    if tool == "render":
        render(state)
        return 0
    if tool == "boot":
        return boot(state)
    return fail(2, __doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] if os.path.basename(sys.argv[0]).startswith("npu_fake") else sys.argv))
