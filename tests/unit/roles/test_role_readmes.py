"""Every role has a README.md whose Role Variables tables match its meta/argument_specs.yml.

The tables are read back from the Markdown (not re-rendered), so a hand edit, a stale README after
a spec change, or a generator bug all fail here. Fix: run scripts/role-readmes.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SCRIPT = os.path.join(ROOT, "scripts", "role-readmes")
ROLES = sorted(r for r in os.listdir(os.path.join(ROOT, "roles")) if os.path.isdir(os.path.join(ROOT, "roles", r)))
BEGIN = "<!-- BEGIN role-variables:"
END = "<!-- END role-variables -->"
HEADINGS = ("Requirements", "Role Variables", "Example Playbook", "What it changes on the host")
ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \| (yes|no) \| (.*?) \| (.*) \|$")


def specs(role):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as f:
        return yaml.safe_load(f)["argument_specs"]


def readme(role):
    path = os.path.join(ROOT, "roles", role, "README.md")
    assert os.path.exists(path), f"roles/{role}/README.md is missing: write one (see roles/prefill/README.md)"
    with open(path, encoding="utf-8") as f:
        return f.read()


def tables(text):
    """{entry point: {variable: (type, required, default or MISSING)}} from the generated section."""
    start, end = text.find(BEGIN), text.find(END)
    assert 0 <= start < end, "the README has no role-variables markers"
    out, entry = {}, "main"
    for line in text[start:end].splitlines():
        m = re.match(r"^### Entry point `([^`]+)`", line)
        if m:
            entry = m.group(1)
            out.setdefault(entry, {})
            continue
        m = ROW.match(line)
        if m:
            name, typ, req, default = m.group(1), m.group(2).strip(), m.group(3), m.group(4).strip()
            value = yaml.safe_load(default.strip("`").replace("\\|", "|")) if default else MISSING
            out.setdefault(entry, {})[name] = (typ, req == "yes", value)
    return out


MISSING = object()


def expected(spec):
    want = {}
    for entry, s in spec.items():
        want[entry] = {}
        for name, opt in (s.get("options") or {}).items():
            typ = opt.get("type", "str")
            if typ == "list" and "elements" in opt:
                typ = f"list of {opt['elements']}"
            want[entry][name] = (typ, bool(opt.get("required")), opt.get("default", MISSING))
    return want


@pytest.mark.parametrize("role", ROLES)
def test_readme_variables_match_argument_specs(role):
    got, want = tables(readme(role)), expected(specs(role))
    for entry in want:
        if not want[entry]:
            assert not got.get(entry), f"roles/{role}: entry point {entry} has no options, README lists {got[entry]}"
            continue
        assert entry in got, f"roles/{role}/README.md lacks entry point {entry}: run scripts/role-readmes"
        assert list(got[entry]) == list(want[entry]), (
            f"roles/{role}/README.md ({entry}) lists {list(got[entry])}, the specs {list(want[entry])}: "
            "run scripts/role-readmes")
        for name, (typ, req, default) in want[entry].items():
            g = got[entry][name]
            assert g[0] == typ and g[1] == req, f"roles/{role} {name}: README {g[:2]}, specs {(typ, req)}"
            assert g[2] is default if default is MISSING else g[2] == default, (
                f"roles/{role} {name}: README default {g[2]!r}, specs {default!r}")
    assert set(got) <= set(want), f"roles/{role}/README.md lists unknown entry points {set(got) - set(want)}"


@pytest.mark.parametrize("role", ROLES)
def test_readme_has_the_sections(role):
    text = readme(role)
    assert text.startswith(f"# vllm_pd.ascend.{role}\n"), text[:60]
    for heading in HEADINGS:
        assert re.search(rf"^## {heading}$", text, re.M), f"roles/{role}/README.md lacks '## {heading}'"
    example = re.search(r"^## Example Playbook\n(.*?)^## ", text, re.M | re.S).group(1)
    block = re.search(r"```yaml\n(.*?)```", example, re.S)
    assert block and f"vllm_pd.ascend.{role}" in block.group(1), f"roles/{role}: the example does not use the role"
    yaml.safe_load(block.group(1))


def test_generator_check_is_clean_and_catches_drift(tmp_path):
    ok = subprocess.run([sys.executable, SCRIPT, "--check"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    role = tmp_path / "proxy"
    shutil.copytree(os.path.join(ROOT, "roles", "proxy"), role)
    spec_path = role / "meta" / "argument_specs.yml"
    spec = yaml.safe_load(spec_path.read_text())
    spec["argument_specs"]["main"]["options"]["proxy_new_knob"] = {"type": "int", "default": 3, "description": "New."}
    spec_path.write_text(yaml.safe_dump(spec))
    drift = subprocess.run([sys.executable, SCRIPT, "--check", str(role)], capture_output=True, text=True, check=False)
    assert drift.returncode == 1 and "run scripts/role-readmes" in drift.stderr, drift.stderr
    fixed = subprocess.run([sys.executable, SCRIPT, str(role)], capture_output=True, text=True, check=False)
    assert fixed.returncode == 0, fixed.stderr
    assert "| `proxy_new_knob` | int | no | `3` | New. |" in (role / "README.md").read_text()
    assert subprocess.run([sys.executable, SCRIPT, "--check", str(role)], check=False).returncode == 0
    (role / "README.md").write_text("# no markers\n")
    bare = subprocess.run([sys.executable, SCRIPT, "--check", str(role)], capture_output=True, text=True, check=False)
    assert bare.returncode == 1 and "markers" in bare.stderr, bare.stderr
