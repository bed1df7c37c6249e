from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import rolling


def hosts(cluster, prefill, decode):
    return ([{"host": h, "cluster": cluster, "role": "prefill"} for h in prefill]
            + [{"host": h, "cluster": cluster, "role": "decode"} for h in decode])


def names(batches):
    return [["%s:%s" % (m["role"][0], m["host"]) for m in b] for b in batches]


def test_prefill_first_one_host_at_a_time():
    assert names(rolling.batches(hosts("a", ["p1", "p2"], ["d1", "d2"]))) == [["p:p1"], ["p:p2"], ["d:d1"], ["d:d2"]]


def test_canary_then_batch_size_never_every_host_of_a_role():
    plan = names(rolling.batches(hosts("a", ["p1", "p2"], ["d1", "d2", "d3", "d4", "d5"]), batch_size=3))
    assert plan == [["p:p1"], ["p:p2"], ["d:d1"], ["d:d2", "d:d3", "d:d4"], ["d:d5"]]
    # a batch size larger than the role still leaves one host serving
    plan = names(rolling.batches(hosts("a", ["p1", "p2", "p3"], ["d1", "d2"]), batch_size=10))
    assert plan == [["p:p1"], ["p:p2", "p:p3"], ["d:d1"], ["d:d2"]]


def test_clusters_roll_side_by_side():
    plan = names(rolling.batches(hosts("a", ["p1", "p2"], ["d1", "d2"]) + hosts("b", ["q1", "q2"], ["e1", "e2", "e3"])))
    assert plan == [["p:p1", "p:q1"], ["p:p2", "p:q2"], ["d:d1", "d:e1"], ["d:d2", "d:e2"], ["d:e3"]]


def test_a_host_in_both_groups_rolls_once_per_role():
    plan = names(rolling.batches(hosts("a", ["h1", "h2"], ["h1", "h2"])))
    assert plan == [["p:h1"], ["p:h2"], ["d:h1"], ["d:h2"]]


def test_no_hosts_no_batches():
    assert rolling.batches([]) == []


def test_a_running_cluster_needs_the_admin_api_and_two_hosts_per_role():
    ok = {"prefill": ["p1", "p2"], "decode": ["d1", "d2"]}
    assert rolling.findings("a", ok, running=True, admin_api=True) == []
    [f] = rolling.findings("a", ok, running=True, admin_api=False)
    assert f["name"] == "RollingNotPossible" and "no admin API" in f["message"] and "load_balance_proxy_server_example" in f["message"]
    [f] = rolling.findings("a", {"prefill": ["p1"], "decode": ["d1", "d2"]}, running=True, admin_api=True)
    assert "1 prefill host(s) (p1)" in f["message"] and "decode host" not in f["message"]
    assert "without vllm_pd_rollout=rolling" in f["message"]


def test_a_cluster_that_runs_nothing_has_nothing_to_roll():
    assert rolling.findings("a", {"prefill": ["p1"], "decode": []}, running=False, admin_api=False) == []


ONE_P_TWO_D = {"prefill": ["p1"], "decode": ["d1", "d2"]}


def test_only_the_roles_the_change_restarts_need_a_second_host():
    """Issue 32: a decode change on 1P2D rolls (P keeps serving untouched); a prefill change is refused naming P."""
    assert rolling.findings("a", ONE_P_TWO_D, running=True, admin_api=True, restarting=["decode"]) == []
    [f] = rolling.findings("a", ONE_P_TWO_D, running=True, admin_api=True, restarting=["prefill"])
    assert "1 prefill host(s) (p1) and the change restarts its prefill engines" in f["message"]
    assert "decode host" not in f["message"]
    [f] = rolling.findings("a", ONE_P_TWO_D, running=True, admin_api=True, restarting=["prefill", "decode"])
    assert "1 prefill host(s) (p1)" in f["message"] and "decode host" not in f["message"]
    # 2P1D, a decode change: the single D is named, the two P hosts are not
    [f] = rolling.findings("a", {"prefill": ["p1", "p2"], "decode": ["d1"]}, running=True, admin_api=True,
                           restarting=["decode"])
    assert "1 decode host(s) (d1)" in f["message"] and "prefill host" not in f["message"]


def test_the_admin_api_is_needed_only_when_the_change_restarts_an_engine():
    [f] = rolling.findings("a", ONE_P_TWO_D, running=True, admin_api=False, restarting=["decode"])
    assert "no admin API" in f["message"] and "host(s)" not in f["message"]
    # a change that restarts no running engine (a proxy or a new host only) has nothing to take out
    assert rolling.findings("a", {"prefill": ["p1"], "decode": ["d1"]}, running=True, admin_api=False,
                            restarting=[]) == []


def test_without_the_plan_every_role_counts():
    [f] = rolling.findings("a", {"prefill": ["p1"], "decode": ["d1"]}, running=True, admin_api=True)
    assert "1 prefill host(s) (p1)" in f["message"] and "1 decode host(s) (d1)" in f["message"]
