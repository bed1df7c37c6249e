"""The API key end to end, and no secret in any output (issue 31 items 1 and 4).

Cluster lab22 of lab/gen-inventory (1P2D, the real example proxy of the lab's release) with
VLLM_API_KEY, HF_TOKEN and an operator-named secret (vllm_pd_secret_env_names) in vllm_pd_engine_env.
The stand-in answers 401 like vLLM 0.23 under /v1 without the key. deploy (fresh), benchmark, doctor,
a retire of one D, and stop run with --diff -vvv; the key gets every probe, smoke, pair and benchmark
request through (the proxy's from its 0600 env file), a request without it gets 401 from P and D, and
no secret appears in any output, the doctor's page, the benchmark's JSON and page, the journal or any
file the runs wrote on the hosts that is not 0600. Cluster lab23 (1P1D, the mooncake wheel's proxy, real
upstream code) deploys with a key and passes its smoke; a key that differs between its P and D is refused
before anything changes, naming the hosts and variables and showing no key. Cluster lab24 (2P2D, the
example proxy) rolls a prefill flag change under load with --diff -vvv: each restarted P is proven with
both D through their API (the key from the proxy's env file), no request fails, no secret shows.
The containers are removed at the end.
"""
import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen
from conftest import Lab, guard, own_lab

pytestmark = pytest.mark.lab

P, D1, D2 = "pd-p22", "pd-d22-1", "pd-d22-2"
KEY = "sk-lab22-KEYCANARY-4f1e9b"
SECRETS = {"VLLM_API_KEY": KEY, "HF_TOKEN": "hf_TOKENCANARY_81d2c7", "SITE_CREDENTIALS": "creds-CREDCANARY-55aa"}
KEY23 = "sk-lab23-KEYCANARY-0c3d"
ENGINE_ENV = {"VLLM_LAB_STARTUP_DELAY": "1", "VLLM_LAB_PREFILL_MS_PER_TOKEN": "2", "VLLM_LAB_DECODE_MS_PER_TOKEN": "10"}
VVV = ("--diff", "-vvv")
MARK = "/var/tmp/lab-api-key.mark"
# where a run writes on a host (the journal too: a key logged by any process would land there)
SCAN = "/etc /usr/local /var/lib /var/tmp /var/log /tmp /opt /root /run/systemd/transient"


def request(url, key=None, body=None):
    """(status, text) of GET/POST URL, with Authorization: Bearer KEY when given."""
    host = url.split("/")[2].rsplit(":", 1)[0]
    guard(host)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body else None, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Outputs:
    """Everything the runs printed, and the files they wrote on the controller, for the secret search."""

    def __init__(self):
        self.texts = []

    def run(self, lab, path, *args, check=True):
        r = lab.playbook(path, *VVV, *args, check=check)
        self.texts.append((f"{path} {' '.join(args)}", r.stdout + r.stderr))
        return r

    def add_files(self, root):
        for p in Path(root).rglob("*"):
            if p.is_file():
                self.texts.append((str(p), p.read_text(errors="replace")))

    def leaks(self, secrets):
        return [(where, name) for where, text in self.texts for name, value in secrets.items() if value in text]


def host_leaks(lab, host, secrets):
    """Files written on HOST since the mark that are not 0600 and hold a secret, and journal lines that do."""
    patterns = "\n".join(secrets.values()) + "\n"
    files = lab.host(host).run(
        f"find {SCAN} -xdev -type f -newer {MARK} ! -perm 0600 -print0 2>/dev/null | xargs -0 -r grep -lFa -f /dev/stdin "
        f"<<'EOF'\n{patterns}EOF").stdout.split()
    journal = lab.host(host).run(f"journalctl -o cat --no-pager | grep -cFa -f /dev/stdin <<'EOF'\n{patterns}EOF").stdout
    return files, int(journal.strip() or 0)


@pytest.fixture(scope="module")
def lab22(tmp_path_factory):
    values = {"proxy_extra_args": ["--waiting-retry-interval", "0.2"],
              "vllm_pd_engine_env": dict(ENGINE_ENV, **SECRETS), "vllm_pd_secret_env_names": ["SITE_CREDENTIALS"]}
    with own_lab(tmp_path_factory, 22, decode=2, group_vars={"lab22": values}) as lab:
        for h in lab.hosts:
            lab.ssh(h, f"touch {MARK}")
        yield lab


def test_key_end_to_end_and_no_secret_anywhere(lab22, tmp_path):
    lab, out = lab22, Outputs()
    r = out.run(lab, "playbooks/deploy_pd.yml")
    assert "KV moved P -> D for" in r.stdout, r.stdout[-3000:]
    ip = {h: lab.hosts[h]["data_ip"] for h in lab.hosts}
    models = {P: f"http://{ip[P]}:8100/v1/models", D1: f"http://{ip[D1]}:8200/v1/models", D2: f"http://{ip[D2]}:8200/v1/models"}
    for host, url in models.items():
        # vLLM 0.23: 401 under /v1 without the key or with another one; /health and /metrics stay open
        assert request(url) == (401, '{"error": "Unauthorized"}'), host
        assert request(url, "sk-wrong")[0] == 401, host
        assert request(url, KEY)[0] == 200, host
        assert request(url.replace("/v1/models", "/health"))[0] == 200
        assert request(url.replace("/v1/models", "/metrics"))[0] == 200
    body = {"model": "/models/lab-model", "prompt": "hello", "max_tokens": 4, "temperature": 0}
    assert request(f"http://{ip[P]}:8100/v1/completions", body=body)[0] == 401
    # the proxy has the key from its 0600 env file (never in the unit), so a client needs none through it
    proxy_env = lab.host(P).file("/etc/vllm-pd/proxy.env")
    assert proxy_env.mode == 0o600 and f"OPENAI_API_KEY={KEY}" in proxy_env.content_string
    unit = lab.host(P).file("/etc/systemd/system/vllm-pd-proxy.service").content_string
    assert "EnvironmentFile=/etc/vllm-pd/proxy.env" in unit and KEY not in unit
    status, text = request(f"http://{ip[P]}:8000/v1/completions", body=body)
    assert status == 200 and json.loads(text)["choices"][0]["text"], text
    # the key on no command line of any process
    for h in lab.hosts:
        assert KEY not in lab.host(h).run("ps -eo args").stdout, h

    bench_dir = tmp_path / "bench"
    r = out.run(lab, "playbooks/benchmark.yml", "-e", f"vllm_pd_bench_dir={bench_dir}", "-e", "vllm_pd_bench_requests=12",
                "-e", "vllm_pd_bench_warmup=2")
    [run] = [p for p in (bench_dir / "lab22").glob("*.json") if p.name != "baseline.json"]
    res = json.loads(run.read_text())["result"]
    assert res["completed"] == 12 and res["failed"] == 0, res

    page, js = tmp_path / "doctor.html", tmp_path / "doctor.json"
    r = out.run(lab, "playbooks/doctor.yml", "-e", f"vllm_pd_doctor_report={page}", "-e", f"vllm_pd_doctor_json={js}")
    assert page.exists() and js.exists()
    # the benchmark's JSON and page, the doctor's page and JSON
    out.add_files(tmp_path)

    # a rerun changes nothing; then retire one D (drained out of the proxy with the key, stopped, removed)
    r = out.run(lab, "playbooks/deploy_pd.yml")
    assert set(Lab.changed(r).values()) == {0}, Lab.changed(r)
    retire = Path(lab.inventory) / "host_vars" / f"{D2}.yml"
    retire.write_text("---\nvllm_pd_state: absent\n")
    try:
        r = out.run(lab, "playbooks/deploy_pd.yml")
    finally:
        retire.unlink()
    assert lab.unit(D2, "vllm-pd-decode.service")[1] in ("inactive", ""), r.stdout[-3000:]
    assert request(models[D1], KEY)[0] == 200

    out.run(lab, "playbooks/stop_pd.yml")
    leaks = out.leaks(SECRETS)
    assert leaks == [], leaks
    for h in lab.hosts:
        assert host_leaks(lab, h, SECRETS) == ([], 0), h
    # the env files that hold the secrets are 0600 (and were scanned as such)
    for h, name in ((P, "prefill"), (D1, "decode")):
        assert lab.host(h).file(f"/etc/vllm-pd/{name}.env").mode == 0o600


@pytest.fixture(scope="module")
def lab23(tmp_path_factory):
    values = {"vllm_pd_engine_env": dict(ENGINE_ENV, VLLM_API_KEY=KEY23)}
    with own_lab(tmp_path_factory, 23, group_vars={"lab23": values}) as lab:
        yield lab


def test_wheel_proxy_with_a_key_and_a_key_that_differs_is_refused_first(lab23, tmp_path):
    lab, out = lab23, Outputs()
    r = out.run(lab, "playbooks/deploy_pd.yml")
    assert "KV moved P -> D for" in r.stdout, r.stdout[-3000:]
    p, d = "pd-p23", "pd-d23"
    assert request(f"http://{lab.hosts[d]['data_ip']}:8200/v1/models")[0] == 401
    bench_dir = tmp_path / "bench"
    out.run(lab, "playbooks/benchmark.yml", "-e", f"vllm_pd_bench_dir={bench_dir}", "-e", "vllm_pd_bench_requests=6",
            "-e", "vllm_pd_bench_warmup=1")
    out.add_files(bench_dir)

    other = "sk-lab23-OTHERCANARY-77"
    hv = Path(lab.inventory) / "host_vars" / f"{d}.yml"
    hv.write_text("---\n" + json.dumps({"decode_env": dict(ENGINE_ENV, VLLM_API_KEY=other)}) + "\n")
    try:
        r = out.run(lab, "playbooks/deploy_pd.yml", check=False)
    finally:
        hv.unlink()
    assert r.returncode != 0
    assert (f"VLLM_API_KEY differs between the engines of the cluster: key A on {p} (prefill, vllm_pd_engine_env); "
            f"key B on {d} (decode, decode_env)") in r.stdout, r.stdout[-3000:]
    assert "Fix: set VLLM_API_KEY once for the cluster" in r.stdout
    assert set(Lab.changed(r).values()) == {0}, Lab.changed(r)
    assert lab.unit(d, "vllm-pd-decode.service")[1] == "active"
    assert out.leaks({"key": KEY23, "other": other}) == []
    shutil.rmtree(bench_dir, ignore_errors=True)


# ---- a rolling change with the key (cluster lab24, 2P2D, the example proxy's admin API)

P24 = ("pd-p24-1", "pd-p24-2")
KEY24 = "sk-lab24-KEYCANARY-9e7"
SECRETS24 = {"VLLM_API_KEY": KEY24, "HF_TOKEN": "hf_TOKENCANARY24_3b"}


@pytest.fixture(scope="module")
def lab24(tmp_path_factory):
    values = {"proxy_extra_args": ["--waiting-retry-interval", "0.2"],
              "vllm_pd_engine_env": dict(ENGINE_ENV, **SECRETS24)}
    with own_lab(tmp_path_factory, 24, prefill=2, decode=2, group_vars={"lab24": values}) as lab:
        for h in lab.hosts:
            lab.ssh(h, f"touch {MARK}")
        yield lab


def test_rolling_change_proves_pairs_with_the_key_and_shows_no_secret(lab24):
    lab, out = lab24, Outputs()
    r = out.run(lab, "playbooks/deploy_pd.yml")
    assert "KV moved P -> D for" in r.stdout, r.stdout[-3000:]
    before = {h: lab.host(h).service("vllm-pd-prefill.service").systemd_properties["MainPID"] for h in P24}
    changed = Path(lab.inventory).parent / (Path(lab.inventory).name + "-flag")
    shutil.copytree(lab.inventory, changed)
    (changed / "group_vars" / "all" / "change.yml").write_text("prefill_extra_args: [--max-num-seqs, '48']\n")
    flag = Lab(changed)
    proxy = lab.hosts[P24[0]]["data_ip"]
    bg = loadgen.Background(loadgen.LoadSpec(f"http://{proxy}:8000", rate=3.0, count=3000, max_tokens=8, timeout=60,
                                             guard=lab.guard, api_key=KEY24)).start()
    try:
        r = out.run(flag, "playbooks/deploy_pd.yml", "-e", "vllm_pd_rollout=rolling", check=False)
    finally:
        result = bg.stop_and_wait()
        flag.close()
    assert r.returncode == 0, r.stdout[-6000:]
    # each restarted P was proven with both D through the engines' API (the key read from the proxy's env file;
    # without it P answers 401 and the run stops with PairProofFailed)
    assert " ".join(r.stdout.split()).count('{"state": "proven"') >= 2, r.stdout[-3000:]
    after = {h: lab.host(h).service("vllm-pd-prefill.service").systemd_properties["MainPID"] for h in P24}
    assert all(after[h] != before[h] for h in P24), (before, after)
    assert result["failed"] == 0 and result["completed"] >= 10, result
    out.run(lab, "playbooks/stop_pd.yml")
    assert out.leaks(SECRETS24) == [], out.leaks(SECRETS24)
    for h in lab.hosts:
        assert host_leaks(lab, h, SECRETS24) == ([], 0), h
