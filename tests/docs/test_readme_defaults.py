"""The defaults both READMEs document (the "Variable | Default | Meaning" tables) are the ones the roles apply,
and the roles' meta/argument_specs.yml accept them.

A README variable vllm_pd_X is applied by each role option whose defaults/main.yml value is a template of
vllm_pd_X. For each: the option rendered with vllm_pd_X unset (Ansible's own templating) equals the README's
default and the spec's default, and passes Ansible's own argument-spec validation; where the README documents
null for it (its meaning says "null", or its default is "unset" and the role's default is null too), the
option rendered with vllm_pd_X: null passes that validation too (issue 32: vllm_pd_bench_rate: null, the
documented closed loop, was refused by the benchmark role's spec).
"""
import re
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = Path(__file__).resolve().parents[2]
HEADERS = {"README.md": "| Variable | Default | Meaning |", "README.zh-CN.md": "| 变量 | 默认值 | 含义 |"}
SEPARATORS = {"README.md": ", ", "README.zh-CN.md": "、"}
UNSET = ("unset", "未设置", "不设置", "-")
REQUIRED = ("required", "必填")
SKIP = object()  # a default in words (e.g. "true unless parallel"): nothing literal to compare
VAR = re.compile(r"\bvllm_pd_\w+")


def readme_rows(readme):
    """[(variable, default cell, meaning part)] of the README's variable tables."""
    out, lines, inside = [], (ROOT / readme).read_text(encoding="utf-8").splitlines(), False
    for line in lines:
        if line.strip() == HEADERS[readme]:
            inside = True
            continue
        if not inside or line.startswith("|---"):
            continue
        if not line.startswith("|"):
            inside = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = re.findall(r"`(vllm_pd_\w+)`", cells[0])
        defaults = cells[1].split(SEPARATORS[readme])
        meanings = cells[2].split("; ") if readme == "README.md" else [cells[2]]
        for i, name in enumerate(names):
            out.append((name, defaults[i] if len(defaults) == len(names) else cells[1],
                        meanings[i] if len(meanings) == len(names) else cells[2]))
    return out


def literal(cell):
    """The default a README cell documents: a value, None (unset) or SKIP."""
    text = cell.strip()
    if text.startswith(UNSET) or text == "-":
        return None
    if text.startswith("`") and text.endswith("`") and text.count("`") == 2:
        return yaml.safe_load(text.strip("`"))
    return yaml.safe_load(text) if re.fullmatch(r"-?[0-9.]+|true|false", text) else SKIP


def role_options():
    """{vllm_pd_X: [(role, option, template, spec)]} of the options whose default is a template of vllm_pd_X."""
    out = {}
    for role in sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "defaults" / "main.yml").exists()):
        defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
        specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        options = specs["main"]["options"]
        for option, value in defaults.items():
            names = VAR.findall(value) if isinstance(value, str) else []
            if names and option in options:
                out.setdefault(names[0], []).append((role, option, value, options[option], defaults))
    return out


def render(template, variables, defaults=None):
    """TEMPLATE as Ansible renders it with VARIABLES and the role's DEFAULTS (which may refer to each other)."""
    scope = dict((k, trust_as_template(v) if isinstance(v, str) else v) for k, v in (defaults or {}).items())
    scope.update(variables)
    return Templar(loader=DataLoader(), variables=scope).template(trust_as_template(template))


def validate(option, spec, value):
    spec = dict((k, v) for k, v in spec.items() if k not in ("description", "version_added"))
    return ArgumentSpecValidator({option: spec}).validate({option: value}).error_messages


def cases(readme):
    mapped = role_options()
    # a required variable has no default to compare
    return [(readme, name, cell, meaning, role, option, template, spec, defaults)
            for name, cell, meaning in readme_rows(readme) if not cell.startswith(REQUIRED)
            for role, option, template, spec, defaults in mapped.get(name, [])]


ALL = cases("README.md") + cases("README.zh-CN.md")


def test_the_tables_are_read():
    names = set(c[1] for c in ALL if c[0] == "README.md")
    # the bench, engine, preflight, proxy, rollout and monitoring variables: the check is not empty
    assert len(names) >= 30 and {"vllm_pd_bench_rate", "vllm_pd_rollout", "vllm_pd_stop_services"} <= names, names
    assert names == set(c[1] for c in ALL if c[0] == "README.zh-CN.md")


@pytest.mark.parametrize("readme,name,cell,meaning,role,option,template,spec,defaults", ALL,
                         ids=["%s-%s-%s.%s" % (c[0], c[1], c[4], c[5]) for c in ALL])
def test_documented_default_is_the_roles_and_its_spec_accepts_it(readme, name, cell, meaning, role, option,
                                                                 template, spec, defaults):
    documented = literal(cell)
    unset = render(template, {}, defaults)
    where = "%s documents %s default %r; roles/%s option %s" % (readme, name, cell, role, option)
    if documented is not SKIP:
        if documented is None:
            assert unset in (None, ""), "%s renders %r" % (where, unset)
        else:
            assert unset == documented and type(unset) is type(documented) or (
                isinstance(documented, float) and unset == documented), "%s renders %r" % (where, unset)
    if "default" in spec and unset not in (None, ""):
        assert spec["default"] == unset, "%s: meta/argument_specs.yml default %r" % (where, spec["default"])
    assert validate(option, spec, unset) == [], where
    if "null" in meaning or (documented is None and unset is None):
        assert validate(option, spec, render(template, {name: None}, defaults)) == [], "%s: %s: null is refused" % (where, name)


def test_the_check_catches_a_spec_that_refuses_a_documented_null():
    """The failure of issue 32 itself: a float option with a default refuses null (Ansible's validator)."""
    assert validate("benchmark_rate", {"type": "float", "default": 4.0}, None)
    assert validate("benchmark_rate", {"type": "float", "default": 4.0},
                    render("{{ vllm_pd_bench_rate | default(4.0) }}", {"vllm_pd_bench_rate": None}))
