import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.proxy_members import (
    doctor_view, live_members, member_key, plan, unit_members)

ANSWER = {"message": "add prefill instances: [].", "current_prefill_instances": ["10.0.0.1:8100"],
          "current_decode_instances": ["10.0.0.3:8200", "10.0.0.4:8200"]}


def test_live_members_reads_the_lists():
    assert live_members(ANSWER) == {"prefill": ["10.0.0.1:8100"], "decode": ["10.0.0.3:8200", "10.0.0.4:8200"]}


@pytest.mark.parametrize("answer", [
    {"error": "Instance type 'x' is not supported."},
    {"detail": "Not Found"},                     # a proxy without the admin API (FastAPI 404 body)
    "Not Found",
    {"current_prefill_instances": []},
])
def test_a_proxy_without_member_lists_is_refused(answer):
    with pytest.raises(ValueError):
        live_members(answer)


def test_plan_adds_in_desired_order_and_removes_what_the_inventory_dropped():
    p = plan(live_members(ANSWER), {"prefill": ["10.0.0.1:8100", "10.0.0.2:8100"], "decode": ["10.0.0.4:8200"]})
    assert p == {"add": {"prefill": ["10.0.0.2:8100"], "decode": []},
                 "remove": {"prefill": [], "decode": ["10.0.0.3:8200"]}, "changed": True}


def test_plan_of_the_same_members_changes_nothing():
    assert plan(live_members(ANSWER), live_members(ANSWER))["changed"] is False


def test_loopback_names_are_one_member_as_in_the_proxy():
    assert member_key("localhost:8100") == member_key("127.0.0.1:8100") == "0.0.0.0:8100"
    assert plan({"prefill": ["localhost:1"]}, {"prefill": ["127.0.0.1:1"]})["changed"] is False


def test_unit_members_reads_the_command_line():
    argv = ["/usr/bin/python3", "-m", "mooncake.vllm_v1_proxy_server", "--host", "10.0.0.1", "--port", "8000",
            "--prefiller-hosts", "10.0.0.1", "--prefiller-ports", "8100", "--decoder-hosts", "10.0.0.3", "10.0.0.4",
            "--decoder-ports", "8200", "8200", "--max-retries", "3"]
    assert unit_members(argv) == {"prefill": ["10.0.0.1:8100"], "decode": ["10.0.0.3:8200", "10.0.0.4:8200"]}


def test_doctor_view_names_missing_extra_and_draining():
    live = {"prefill": ["10.0.0.1:8100"], "decode": ["10.0.0.3:8200", "10.0.0.4:8200", "10.0.0.9:8200"]}
    want = {"prefill": ["10.0.0.1:8100", "10.0.0.2:8100"], "decode": ["10.0.0.3:8200"]}
    assert doctor_view(live, want, ["10.0.0.4:8200"]) == {
        "missing": {"prefill": ["10.0.0.2:8100"], "decode": []},
        "extra": {"prefill": [], "decode": ["10.0.0.9:8200"]},
        "draining": {"prefill": [], "decode": ["10.0.0.4:8200"]}}


def test_members_no_inventory_host_explains_are_named_and_kept_unless_allowed():
    """Issue 32: a member whose address is no host of the cluster's inventory (a host deleted from it, an
    instance added by hand) is named; the plan keeps it unless its removal is allowed."""
    from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify.proxy_members import plan, unexplained
    live = {"prefill": ["10.0.0.1:8100"], "decode": ["10.0.0.2:8200", "10.0.0.9:8200", "localhost:8300"]}
    known = ["10.0.0.1", "10.0.0.2", "127.0.0.1"]
    assert unexplained(live, known) == {"prefill": [], "decode": ["10.0.0.9:8200"]}
    desired = {"prefill": ["10.0.0.1:8100"], "decode": ["10.0.0.2:8200"]}
    assert plan(live, desired)["remove"]["decode"] == ["10.0.0.9:8200", "localhost:8300"]
    kept = plan(live, desired, keep=unexplained(live, known)["decode"])
    # a known host's member the inventory no longer wants still goes; the unexplained one stays
    assert kept["remove"]["decode"] == ["localhost:8300"] and kept["add"] == {"prefill": [], "decode": []}
    assert unexplained(live, []) == live
