"""The record reading of molecule/shared/tests/test_hosts.py (molecule verify), against the record the
collection writes (plugins/module_utils/ports/holders.py record_lines), without a host."""
import importlib.util
from pathlib import Path

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.ports import holders

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def th():
    spec = importlib.util.spec_from_file_location("molecule_test_hosts", ROOT / "molecule" / "shared" / "tests" / "test_hosts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ENABLED = dict(kind="unit", name="grafana-server.service", enabled="enabled", active=True, disable=True,
               sockets=[], services=[])
DISABLED = dict(ENABLED, enabled="disabled", disable=False)


def test_first_record_of_a_holder_is_its_state_before(th):
    later = dict(ENABLED, enabled="disabled", disable=False)  # a second run sees it already disabled
    text = "\n".join(holders.record_lines([ENABLED, later])) + "\n\n"
    assert th.holders_before(text) == {"grafana-server.service": ENABLED}


def test_enabled_holder_must_be_disabled_and_a_disabled_one_stays_disabled(th):
    assert th.expected_unit_state(ENABLED) == ("inactive", "disabled")
    assert th.expected_unit_state(DISABLED) == ("inactive", "disabled")
    static = dict(ENABLED, enabled="static", disable=False)
    assert th.expected_unit_state(static) == ("inactive", "static")
    # an enabled unit the preflight did not disable would be wrong on the host: the state says enabled
    assert th.expected_unit_state(dict(ENABLED, disable=False)) == ("inactive", "enabled")


def test_a_line_that_is_not_json_fails(th):
    with pytest.raises(ValueError):
        th.holders_before("grafana-server.service\n")
