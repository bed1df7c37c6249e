"""README.md and README.zh-CN.md must keep the same structure (issue 7).

The outline of a README is the ordered list of its headings (level), fenced code blocks
(language and commands) and tables (row count). The translation may change prose, headings'
words and comments in code; it may not add, drop or move a section, a code block, a table
row or a command.
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)")
HEADING = re.compile(r"^(#{1,6})\s+\S")
# A comment starts at a '#' at the line start or after blank space (not in 'a#b' or URLs).
COMMENT = re.compile(r"(^|\s)#.*$")


def commands(lines):
    """The code lines without comments and blank lines: what a reader would type."""
    out = []
    for line in lines:
        line = COMMENT.sub("", line).rstrip()
        if line:
            out.append(line)
    return out


def outline(text):
    items, fence, code, lang = [], None, [], ""
    table_rows = 0
    for line in text.splitlines():
        if fence:
            if line.strip().startswith(fence):
                items.append(("code", lang, tuple(commands(code))))
                fence, code = None, []
            else:
                code.append(line)
            continue
        if line.lstrip().startswith("|"):
            table_rows += 1
            continue
        if table_rows:
            items.append(("table", table_rows))
            table_rows = 0
        m = FENCE.match(line.strip())
        if m:
            fence, lang = m.group(1), m.group(2)
            continue
        m = HEADING.match(line)
        if m:
            items.append(("heading", len(m.group(1))))
    if table_rows:
        items.append(("table", table_rows))
    assert fence is None, "unclosed code fence"
    return items


def differences(a_text, b_text):
    """Human-readable differences between the outlines of two READMEs; [] when they match."""
    a, b = outline(a_text), outline(b_text)
    problems = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            problems.append("item %d: %r != %r" % (i + 1, x, y))
    if len(a) != len(b):
        longer = a if len(a) > len(b) else b
        problems.append("%d vs %d items; extra: %r" % (len(a), len(b), longer[min(len(a), len(b)):]))
    return problems


def test_readmes_have_the_same_structure():
    en = (ROOT / "README.md").read_text(encoding="utf-8")
    zh = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    assert outline(en), "README.md has no headings"
    assert differences(en, zh) == []


@pytest.mark.parametrize("name", ["README.md", "README.zh-CN.md"])
def test_the_two_commands_stay_on_the_first_screen(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    first_block = next(i for i in outline(text) if i[0] == "code")
    assert first_block[2] == ("bash scripts/demo", "bash scripts/test")
    assert any(line.startswith("bash scripts/test") for line in text.splitlines()[:20]), "not on the first screen"


EN = """# T

## One

```bash
run a --flag   # does a
```

| a | b |
|---|---|
| 1 | 2 |
"""

ZH = """# T

## 一

```bash
run a --flag   # 执行 a
```

| 甲 | 乙 |
|---|---|
| 1 | 2 |
"""


def test_translated_prose_and_comments_match():
    assert differences(EN, ZH) == []


@pytest.mark.parametrize("broken, why", [
    (ZH + "\n## 多出的一节\n", "a section only in one"),
    (ZH.replace("## 一", "### 一"), "a heading level changed"),
    (ZH.replace("run a --flag", "run a --flagg"), "a command changed"),
    (ZH.replace("| 1 | 2 |\n", ""), "a table row dropped"),
    (ZH.replace("```bash\nrun a --flag   # 执行 a\n```\n", ""), "a code block dropped"),
])
def test_a_mismatch_is_caught(broken, why):
    assert differences(EN, broken), why
