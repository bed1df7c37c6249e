"""Both READMEs list every named check of the preflight (plugins/module_utils/common/check_names.py) with its fix."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def check_names():
    tree = ast.parse((ROOT / "plugins" / "module_utils" / "common" / "check_names.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CHECKS":
            return [k.value for k in node.value.keys]
    raise AssertionError("no CHECKS in check_names.py")


@pytest.mark.parametrize("readme", ["README.md", "README.zh-CN.md"])
def test_every_named_check_has_a_row_with_a_fix(readme):
    text = (ROOT / readme).read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|[^\n]*\|[^\n]*\|$", text, re.M)}
    names = check_names()
    assert len(names) > 20
    missing = [n for n in names if n not in rows]
    assert not missing, f"{readme} lacks rows for {missing}"
    for n in names:
        cells = [c.strip() for c in rows[n].strip("|").split("|")]
        assert len(cells) == 3 and cells[2], f"{readme}: {n} has no fix: {rows[n]}"
