"""lab-hosts raises the machine's inotify limits before it starts systemd containers (each holds
several inotify instances of root; the kernel's default of 128 lasts for about 25 lab hosts)."""


def limits(tmp_path, instances, watches):
    proc = tmp_path / "inotify"
    proc.mkdir()
    (proc / "max_user_instances").write_text(f"{instances}\n")
    (proc / "max_user_watches").write_text(f"{watches}\n")
    return proc


def test_low_limits_are_raised_and_kept_for_the_next_boot(tmp_path, lab_hosts):
    proc, conf = limits(tmp_path, 128, 8192), tmp_path / "90-vllm-pd-lab.conf"
    actions = lab_hosts.raise_inotify_limits(str(proc), str(conf))
    assert actions == ["fs.inotify.max_user_instances 128 -> 8192", "fs.inotify.max_user_watches 8192 -> 524288",
                       f"wrote {conf}"]
    assert (proc / "max_user_instances").read_text() == "8192"
    assert "fs.inotify.max_user_instances = 8192\n" in conf.read_text()
    assert lab_hosts.raise_inotify_limits(str(proc), str(conf)) == []  # the second run changes nothing


def test_higher_limits_are_never_lowered(tmp_path, lab_hosts):
    proc, conf = limits(tmp_path, 100000, 1048576), tmp_path / "90-vllm-pd-lab.conf"
    assert lab_hosts.raise_inotify_limits(str(proc), str(conf)) == []
    assert (proc / "max_user_instances").read_text() == "100000\n" and not conf.exists()


def test_only_the_low_one_is_raised_and_the_file_keeps_the_other_as_it_is(tmp_path, lab_hosts):
    proc, conf = limits(tmp_path, 100000, 8192), tmp_path / "90-vllm-pd-lab.conf"
    assert lab_hosts.raise_inotify_limits(str(proc), str(conf))[0] == "fs.inotify.max_user_watches 8192 -> 524288"
    assert "fs.inotify.max_user_instances = 100000\n" in conf.read_text()
