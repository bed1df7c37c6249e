"""doctor.yml on the lab: break a healthy deployment in each of the field report's ways and check that
the doctor names the right root cause first.

The cluster is VLLM_PD_DOCTOR_CLUSTER (default lab1, the default lab); with another inventory, set
VLLM_PD_LAB_INVENTORY too, e.g. a lab/gen-inventory output and VLLM_PD_DOCTOR_CLUSTER=lab2.
Each test starts from a deployment that deploy_pd.yml made healthy, breaks it, runs the doctor, and
restores it (fixtures removed, network rule dropped, deploy_pd.yml again).
"""
import json
import os
import subprocess

import pytest

CLUSTER = os.environ.get("VLLM_PD_DOCTOR_CLUSTER", "lab1")


class Cluster:
    def __init__(self, lab, tmp):
        if CLUSTER not in lab.clusters:
            pytest.fail(f"cluster {CLUSTER} is not in {lab.inventory} (VLLM_PD_DOCTOR_CLUSTER)")
        members = lab.clusters[CLUSTER]
        self.lab, self.tmp = lab, tmp
        self.p = next(h for h in lab.prefill if h in members)
        self.d = next(h for h in lab.decode if h in members)
        self.limit = ["--limit", f"cluster_{CLUSTER}"]
        self.rules = []
        self.runs = 0
        hv = json.loads(subprocess.run([str(lab.root / ".venv" / "bin" / "ansible-inventory"), "-i", lab.inventory,
                                        "--host", self.p], capture_output=True, text=True, check=True,
                                       cwd=lab.root).stdout)
        self.kv_port = int(hv["vllm_pd_kv_port"])

    def deploy(self):
        self.lab.playbook("playbooks/deploy_pd.yml", *self.limit)

    def doctor(self):
        """Run doctor.yml; return (rc, the JSON diagnosis of this cluster, report path, stdout)."""
        self.runs += 1
        html, js = self.tmp / f"report-{self.runs}.html", self.tmp / f"report-{self.runs}.json"
        r = self.lab.playbook("playbooks/doctor.yml", *self.limit, "-e", f"vllm_pd_doctor_report={html}",
                              "-e", f"vllm_pd_doctor_json={js}", check=False)
        assert js.exists(), f"doctor wrote no JSON (rc {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-1500:]}"
        data = json.loads(js.read_text())
        cl = next(c for c in data["clusters"] if c["name"] == CLUSTER)
        findings = [f for f in data["findings"] if f["cluster"] == CLUSTER]
        return r, cl, findings, html

    def engine_env(self, host, kind, line, check=True):
        """Replace the VLLM_HOST_IP line of /etc/vllm-pd/KIND.env (line '' removes it), restart the unit and
        wait until the engine is up (its API answers) or has exited: the doctor looks at a deployment that
        runs, broken, not at one still starting (whose ports are rightly reported closed)."""
        sub = f"s/^VLLM_HOST_IP=.*/{line}/" if line else "/^VLLM_HOST_IP=/d"
        unit, port = f"vllm-pd-{kind}.service", {"prefill": 8100, "decode": 8200}[kind]
        health = f"http://{self.lab.hosts[host]['data_ip']}:{port}/health"
        self.lab.ssh(host, f"sed -i '{sub}' /etc/vllm-pd/{kind}.env && systemctl restart {unit} && "
                           f"for _ in $(seq 120); do "
                           f"python3 -c 'import urllib.request; urllib.request.urlopen(\"{health}\", timeout=1)' "
                           f"2>/dev/null && break; systemctl -q is-active {unit} || break; sleep 0.5; done", check=check)

    def netns(self, host, *argv):
        pid = subprocess.run(["podman", "inspect", "-f", "{{.State.Pid}}", host], capture_output=True, text=True,
                             check=True).stdout.strip()
        subprocess.run(["nsenter", "-t", pid, "-n", *argv], check=True, capture_output=True, text=True)

    def block(self, src, dst_ip, ports):
        """Drop src's TCP packets to dst_ip:ports (in src's network namespace), like a firewall between them."""
        rule = ["OUTPUT", "-d", dst_ip, "-p", "tcp", "--dport", ports, "-j", "DROP"]
        self.netns(src, "iptables", "-I", *rule)
        self.rules.append((src, rule))

    def restore(self):
        for host, rule in self.rules:
            self.netns(host, "iptables", "-D", *rule)
        self.rules = []
        self.lab.fixtures(self.p, state="absent")
        self.deploy()


@pytest.fixture(scope="module")
def cluster(lab, tmp_path_factory):
    c = Cluster(lab, tmp_path_factory.mktemp("doctor"))
    c.deploy()
    return c


@pytest.fixture
def broken(cluster):
    yield cluster
    cluster.restore()


def root(cl):
    rc = cl["root_cause"]
    assert rc, f"no root cause; findings: {cl}"
    return rc


def test_healthy_deployment_has_no_root_cause(cluster):
    r, cl, findings, html = cluster.doctor()
    assert r.returncode == 0, r.stdout[-3000:]
    assert cl["status"] in ("healthy", "warnings"), findings
    assert cl["root_cause"] is None
    assert [ln["status"] for ln in cl["links"]] == ["ok"], cl["links"]
    text = html.read_text()
    assert "<svg" in text and cluster.p in text and cluster.d in text
    assert f"cluster {CLUSTER}: HEALTHY" in r.stdout or f"cluster {CLUSTER}: WARNINGS" in r.stdout


def test_vllm_host_ip_unset(broken):
    broken.engine_env(broken.p, "prefill", "")
    r, cl, findings, html = broken.doctor()
    assert r.returncode != 0
    rc = root(cl)
    assert (rc["check"], rc["host"], rc["step"]) == ("HostIpUnset", broken.p, 1), findings
    # what follows from it: D dials the auto-detected address, the group listens there
    later = [f["check"] for f in findings if f["role"] == "consequence"]
    assert "AdvertisedUnreachable" in later and "PortWrongAddress" in later, later
    assert "HostIpUnset" in html.read_text()


def test_vllm_host_ip_wrong(broken):
    wrong = broken.lab.hosts[broken.p]["mgmt_ip"]     # an address of P, but not the inter-node one
    broken.engine_env(broken.p, "prefill", f"VLLM_HOST_IP={wrong}")
    r, cl, findings, _html = broken.doctor()
    rc = root(cl)
    assert (rc["check"], rc["host"]) == ("HostIpMismatch", broken.p), findings
    assert any(wrong in e for e in rc["evidence"]), rc


def test_group_port_taken_after_start(broken):
    lab = broken.lab
    taken = broken.kv_port + 3
    # P ran fine; while it was down (a restart, a reboot) Grafana came up on a port of its group
    lab.ssh(broken.p, "systemctl stop vllm-pd-prefill.service")
    lab.fixtures(broken.p, ["conflict_service"], lab_conflict_service_port=taken)
    lab.ssh(broken.p, "systemctl start vllm-pd-prefill.service; sleep 8", check=False)
    r, cl, findings, _html = broken.doctor()
    rc = root(cl)
    assert (rc["check"], rc["host"], rc["step"]) == ("PortForeign", broken.p, 2), findings
    assert str(taken) in rc["title"] and any("grafana-server.service" in e for e in rc["evidence"]), rc
    assert "grafana-server.service" in rc["fix"]


def test_decode_cannot_reach_prefill(broken):
    lab = broken.lab
    p_ip = lab.hosts[broken.p]["data_ip"]
    broken.block(broken.d, p_ip, f"{broken.kv_port}:{broken.kv_port + 63}")
    r, cl, findings, _html = broken.doctor()
    rc = root(cl)
    assert (rc["check"], rc["host"]) == ("AdvertisedUnreachable", broken.d), findings
    assert p_ip in rc["title"]
    assert [ln["status"] for ln in cl["links"]] == ["down"]


def test_both_faults_at_once(broken):
    lab = broken.lab
    taken = broken.kv_port + 3
    lab.ssh(broken.p, "systemctl stop vllm-pd-prefill.service")
    lab.fixtures(broken.p, ["conflict_service"], lab_conflict_service_port=taken)
    # the start guard refuses this start (a port of the group is taken): restart fails, nothing is killed
    broken.engine_env(broken.p, "prefill", "", check=False)
    lab.ssh(broken.p, "sleep 8")
    r, cl, findings, _html = broken.doctor()
    rc = root(cl)
    # fault 1 first, as the report says; the taken port is still named, as a consequence
    assert (rc["check"], rc["host"]) == ("HostIpUnset", broken.p), findings
    later = [f for f in findings if f["role"] == "consequence"]
    assert any(f["check"] == "PortForeign" and str(taken) in f["title"] for f in later), later


def test_holder_on_another_address_only_misleads(broken):
    """A listener on 127.0.0.1 on a group port does not block vLLM on VLLM_HOST_IP, but answers curl."""
    taken = broken.kv_port + 3
    broken.lab.fixtures(broken.p, ["conflict_process"], lab_conflict_process_port=taken,
                        lab_conflict_process_address="127.0.0.1")
    r, cl, findings, _html = broken.doctor()
    assert r.returncode == 0 and cl["root_cause"] is None, findings
    notes = [f for f in findings if f["check"] == "PortMisleading"]
    assert notes and notes[0]["severity"] == "warning" and any(f"127.0.0.1:{taken}" in e for e in notes[0]["evidence"])
