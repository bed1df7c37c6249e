"""lab-hosts makes the lab's SSH key once when several lab_up runs start together (CI runs its lab shards in
parallel on a fresh clone; a second ssh-keygen on the half-made key asked to overwrite and failed)."""
import importlib.machinery
import importlib.util
import multiprocessing
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[3]
_LOADER = importlib.machinery.SourceFileLoader("lab_hosts", str(ROOT / "lab" / "lab-hosts"))
_SPEC = importlib.util.spec_from_loader("lab_hosts", _LOADER)
LAB_HOSTS = importlib.util.module_from_spec(_SPEC)
_LOADER.exec_module(LAB_HOSTS)


def _make(key, start, made):
    start.wait()
    made.put(LAB_HOSTS.ensure_key(key))


def test_parallel_runs_make_one_key_pair_that_matches(tmp_path):
    key = str(tmp_path / "lab" / "id_ed25519")
    ctx = multiprocessing.get_context("fork")
    start, made = ctx.Event(), ctx.Queue()
    runs = [ctx.Process(target=_make, args=(key, start, made)) for _ in range(8)]
    for p in runs:
        p.start()
    start.set()
    for p in runs:
        p.join(60)
    assert [p.exitcode for p in runs] == [0] * 8
    assert sorted(made.get() for _ in runs) == [False] * 7 + [True]
    public = subprocess.run(["ssh-keygen", "-y", "-f", key], capture_output=True, text=True, check=True).stdout
    assert public.split()[:2] == pathlib.Path(key + ".pub").read_text().split()[:2]
    assert sorted(p.name for p in (tmp_path / "lab").iterdir()) == ["id_ed25519", "id_ed25519.lock", "id_ed25519.pub"]


def test_an_existing_key_is_kept(tmp_path):
    key = tmp_path / "id_ed25519"
    key.write_text("private")
    (tmp_path / "id_ed25519.pub").write_text("public")
    assert LAB_HOSTS.ensure_key(str(key)) is False
    assert key.read_text() == "private"
