import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.model import pd_consistency as c


def engine(host, kind, tp=8, settings=None, model=None, env=None, extra=None, address=None):
    return {"host": host, "kind": kind, "tp": tp, "model": model or {}, "env": env or {},
            "address": address or host, "settings": c.effective_settings(settings or {}, extra or [])}


def names(findings):
    return sorted(f["name"] for f in findings)


@pytest.mark.parametrize("words, expect", [
    (["--block-size", "128"], {"block_size": "128"}),
    (["--block-size=64"], {"block_size": "64"}),
    (["--enforce-eager", "--kv-cache-dtype", "int8", "--max-model-len=8192"],
     {"kv_cache_dtype": "int8", "max_model_len": "8192"}),
    (["--served-model-name", "a", "b", "--dtype", "bfloat16"], {"served_model_name": "a", "dtype": "bfloat16"}),
    (["-q", "w8a8"], {"quantization": "w8a8"}),
    (["--block-size", "16", "--block-size", "32"], {"block_size": "32"}),
    (["--block-sizes", "16"], {}),
])
def test_parse_extra_args(words, expect):
    assert c.parse_extra_args(words) == expect


def test_extra_args_win_over_typed_and_say_so():
    s = c.effective_settings({"block_size": 128}, ["--block-size=64"])
    assert s["block_size"] == 64 and s["block_size_source"] == "extra args --block-size"
    assert c.effective_settings({"block_size": "128"}, [])["block_size"] == 128
    with pytest.raises(ValueError, match="block_size='x' is not a whole number"):
        c.effective_settings({"block_size": "x"}, [])
    with pytest.raises(ValueError, match="is not JSON"):
        c.effective_settings({}, ["--speculative-config", "{bad"])


def test_setting_args_render_only_what_is_set():
    assert c.setting_args({"block_size": 128, "dtype": None, "speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}) == [
        "--block-size", "128", "--speculative-config", '{"method":"mtp","num_speculative_tokens":1}']
    assert c.setting_args({}) == []


def test_fitting_cluster_has_no_findings():
    m = {"fingerprint": "f" * 64, "files": {"config.json": "1"}, "max_position_embeddings": 4096}
    s = {"block_size": 128, "kv_cache_dtype": "int8"}
    assert c.cluster_findings([engine("p", "prefill", 8, s, m), engine("d", "decode", 4, s, m)]) == []


def test_block_size_only_on_d_names_both_values_and_hosts():
    [f] = c.cluster_findings([engine("p1", "prefill"), engine("d1", "decode", settings={"block_size": 64})])
    assert f["name"] == "BlockSizeMismatch" and f["hosts"] == ["d1", "p1"]
    assert "unset (platform default 128) on prefill p1" in f["message"] and "64 on decode d1" in f["message"]


def test_block_size_in_extra_args_is_read():
    [f] = c.cluster_findings([engine("p1", "prefill", settings={"block_size": 128}),
                              engine("d1", "decode", settings={"block_size": 128}, extra=["--block-size=256"])])
    assert f["name"] == "BlockSizeMismatch" and "256" in f["message"] and "extra args --block-size" in f["message"]


def test_kv_cache_dtype_and_model_and_quantization():
    ma = {"path": "/m", "fingerprint": "a" * 64, "files": {"config.json": "1", "tokenizer.json": "2"}}
    mb = {"path": "/m", "fingerprint": "b" * 64, "files": {"config.json": "9", "tokenizer.json": "2"}}
    found = c.cluster_findings([engine("p1", "prefill", settings={"kv_cache_dtype": "int8"}, model=ma),
                                engine("d1", "decode", settings={"quantization": "w8a8"}, model=mb)])
    assert names(found) == ["KvCacheDtypeMismatch", "ModelMismatch", "QuantizationMismatch"]
    model = [f for f in found if f["name"] == "ModelMismatch"][0]["message"]
    assert "aaaaaaaaaaaaaaaa" in model and "bbbbbbbbbbbbbbbb" in model and "files that differ: config.json" in model


def test_model_missing_on_a_host_is_not_a_mismatch():
    m = {"fingerprint": "a" * 64, "files": {}}
    assert c.model_findings([engine("p", "prefill", model=m), engine("d", "decode", model={"exists": False})]) == []


def test_many_hosts_one_finding_per_distinct_value():
    es = [engine("p%d" % i, "prefill") for i in range(3)] + [engine("d%d" % i, "decode", settings={"dtype": "float16"})
                                                             for i in range(3)]
    assert names(c.cluster_findings(es)) == ["DtypeMismatch"]


def test_spec_decode_rules():
    mtp1 = {"method": "mtp", "num_speculative_tokens": 1}
    mtp2 = {"method": "mtp", "num_speculative_tokens": 2}
    only_p = c.spec_decode_findings([engine("p", "prefill", settings={"speculative_config": mtp1}), engine("d", "decode")])
    assert names(only_p) == ["SpecDecodeMismatch"] and "one side only" in only_p[0]["message"]
    assert c.spec_decode_findings([engine("p", "prefill", settings={"speculative_config": mtp1}),
                                   engine("d", "decode", settings={"speculative_config": mtp2})]) == []
    fewer = c.spec_decode_findings([engine("p", "prefill", settings={"speculative_config": mtp2}),
                                    engine("d", "decode", settings={"speculative_config": mtp1})])
    assert "fewer" in fewer[0]["message"]
    other = c.spec_decode_findings([engine("p", "prefill", settings={"speculative_config": mtp1}),
                                    engine("d", "decode", settings={"speculative_config": {"method": "eagle"}})])
    assert "different methods" in other[0]["message"]


def test_max_model_len_d_must_hold_p():
    m = {"max_position_embeddings": 32768}
    assert c.max_model_len_findings([engine("p", "prefill", settings={"max_model_len": 8192}, model=m),
                                     engine("d", "decode", model=m)]) == []
    [f] = c.max_model_len_findings([engine("p", "prefill", model=m), engine("d", "decode", settings={"max_model_len": 8192}, model=m)])
    assert "32768 on prefill p, 8192 on decode d" in f["message"]
    [u] = c.max_model_len_findings([engine("p", "prefill", settings={"max_model_len": 10}), engine("d", "decode")])
    assert "not known" in u["message"]


def test_max_model_len_of_a_host_this_run_did_not_read_is_not_compared():
    # deploy_pd.yml --limit <a decode host>: the prefill host's config.json was not read, its length is no fact
    m = {"max_position_embeddings": 32768}
    unread_p = dict(engine("p", "prefill"), model_read=False)
    assert c.max_model_len_findings([unread_p, engine("d", "decode", model=m)]) == []
    assert c.max_model_len_findings([engine("p", "prefill", model=m), dict(engine("d", "decode"), model_read=False)]) == []
    # a length the inventory sets is a fact, read or not
    set_p = dict(engine("p", "prefill", settings={"max_model_len": 65536}), model_read=False)
    [f] = c.max_model_len_findings([set_p, engine("d", "decode", model=m)])
    assert "D cannot hold" in f["message"]
    # a host read without a config.json stays unknown, and named
    [u] = c.max_model_len_findings([dict(engine("p", "prefill"), model_read=True), engine("d", "decode", model=m)])
    assert "not known" in u["message"]


def test_tp_not_multiple():
    assert names(c.tp_findings([engine("p", "prefill", 4), engine("d", "decode", 8)])) == ["TpNotMultiple"]
    assert names(c.tp_findings([engine("p", "prefill", 6), engine("d", "decode", 4)])) == ["TpNotMultiple"]
    assert c.tp_findings([engine("p", "prefill", 8), engine("d", "decode", 2)]) == []


def test_intra_roce_on_one_host():
    [f] = c.intra_roce_findings([engine("h", "prefill"), engine("h", "decode")])
    assert f["name"] == "IntraRoceMissing" and "unset for prefill and unset for decode" in f["message"]
    env = {"HCCL_INTRA_ROCE_ENABLE": 1}
    assert c.intra_roce_findings([engine("h", "prefill", env=env), engine("h", "decode", env=env)]) == []
    assert c.intra_roce_findings([engine("a", "prefill"), engine("b", "decode")]) == []
    assert c.intra_roce_findings([engine("a", "prefill", address="10.0.0.1"), engine("b", "decode", address="10.0.0.1")])


def test_engine_env_must_match():
    [f] = c.engine_env_findings([engine("p", "prefill", env={"HCCL_RDMA_TIMEOUT": "20"}),
                                 engine("d", "decode", env={"HCCL_RDMA_TIMEOUT": "18"})])
    assert f["name"] == "EngineEnvMismatch" and "20 on prefill p and 18 on decode d" in f["message"]


def test_ignore_by_name():
    fs = [{"name": "BlockSizeMismatch"}, {"name": "TpNotMultiple"}]
    assert c.split_ignored(fs, ["TpNotMultiple"]) == ([{"name": "BlockSizeMismatch"}], [{"name": "TpNotMultiple"}])
    assert set(c.CHECK_NAMES) >= {"BlockSizeMismatch", "KvCacheDtypeMismatch", "ModelMismatch", "SpecDecodeMismatch",
                                  "MaxModelLenMismatch", "TpNotMultiple", "IntraRoceMissing", "EngineEnvMismatch"}
