"""lab-hosts makes the lab's SSH key once when several lab_up runs start together (CI runs its lab shards in
parallel on a fresh clone; a second ssh-keygen on the half-made key asked to overwrite and failed)."""
import multiprocessing
import pathlib
import subprocess


def _make(ensure_key, key, start, made):
    start.wait()
    made.put(ensure_key(key))


def test_parallel_runs_make_one_key_pair_that_matches(tmp_path, lab_hosts):
    key = str(tmp_path / "lab" / "id_ed25519")
    ctx = multiprocessing.get_context("fork")
    start, made = ctx.Event(), ctx.Queue()
    runs = [ctx.Process(target=_make, args=(lab_hosts.ensure_key, key, start, made)) for run in range(8)]
    for p in runs:
        p.start()
    start.set()
    for p in runs:
        p.join(60)
    assert [p.exitcode for p in runs] == [0] * 8
    assert sorted(made.get() for run in runs) == [False] * 7 + [True]
    public = subprocess.run(["ssh-keygen", "-y", "-f", key], capture_output=True, text=True, check=True).stdout
    assert public.split()[:2] == pathlib.Path(key + ".pub").read_text().split()[:2]
    assert sorted(p.name for p in (tmp_path / "lab").iterdir()) == ["id_ed25519", "id_ed25519.lock", "id_ed25519.pub"]


def test_an_existing_key_is_kept(tmp_path, lab_hosts):
    key = tmp_path / "id_ed25519"
    key.write_text("private")
    (tmp_path / "id_ed25519.pub").write_text("public")
    assert lab_hosts.ensure_key(str(key)) is False
    assert key.read_text() == "private"
