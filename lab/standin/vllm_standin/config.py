"""--kv-transfer-config parsing and vLLM-Ascend's startup validation [facts §3], port formula [facts §2a]."""
import json
import uuid

# vLLM's KVTransferConfig fields; the dataclass forbids any other key [facts §3].
KV_FIELDS = {
    "kv_connector": None, "engine_id": None, "kv_buffer_device": "npu", "kv_buffer_size": 1e9,
    "kv_role": None, "kv_rank": None, "kv_parallel_size": 1, "kv_ip": "127.0.0.1", "kv_port": 14579,
    "kv_connector_extra_config": {}, "kv_connector_module_path": None,
    "enable_permute_local_kv": False, "kv_load_failure_policy": "fail",
}
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
CONNECTOR = "MooncakeConnectorV1"


class ConfigError(ValueError):
    """What vLLM raises at startup for a bad config; the message is vLLM's."""


def parse_kv_transfer_config(text):
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"1 validation error for KVTransferConfig\n  Invalid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ConfigError("1 validation error for KVTransferConfig\n  Input should be a valid dictionary")
    extra = sorted(set(raw) - set(KV_FIELDS))
    if extra:
        raise ConfigError("%d validation error%s for KVTransferConfig\n%s" % (
            len(extra), "s" if len(extra) > 1 else "",
            "\n".join(f"{k}\n  Extra inputs are not permitted [type=extra_forbidden]" for k in extra)))
    cfg = dict(KV_FIELDS, **raw)
    try:  # pydantic lax mode: the docs' "kv_port": "30000" becomes an int
        cfg["kv_port"] = int(cfg["kv_port"])
    except (TypeError, ValueError):
        raise ConfigError("1 validation error for KVTransferConfig\nkv_port\n  Input should be a valid "
                          f"integer, unable to parse string as an integer [input_value={cfg['kv_port']!r}]") from None
    if cfg["kv_connector"] is not None and cfg["kv_role"] not in KV_ROLES:
        raise ConfigError(f"Unsupported kv_role: {cfg['kv_role']}. Supported roles are {list(KV_ROLES)}")
    if cfg["kv_connector"] != CONNECTOR:
        raise ConfigError(f"Connector '{cfg['kv_connector']}' is not registered in this lab stand-in "
                          f"(only {CONNECTOR}).")
    return cfg


def check_parallel(cfg, tp_size, dp_size):
    """vllm_ascend/utils.py and mooncake_connector.py checks, in their order [facts §3]. Like vllm-ascend 0.23
    (utils.py check_kv_extra_config), the own side's tp and dp are compared, not its pp: prefill.pp_size is what
    D reads to pull every pipeline stage."""
    extra = cfg["kv_connector_extra_config"]
    for side in ("prefill", "decode"):
        if side not in extra:
            raise ConfigError(f"AssertionError: kv_connector_extra_config must contain '{side}'")
        for key in ("tp_size", "dp_size"):
            if key not in extra[side]:
                raise ConfigError(f"AssertionError: kv_connector_extra_config.{side} must contain '{key}'")
    side = {"kv_producer": "prefill", "kv_consumer": "decode"}.get(cfg["kv_role"])
    if side:
        own = extra[side]
        if int(own["tp_size"]) != tp_size:
            raise ConfigError(f"KV transfer '{side}' config has a conflicting tensor parallel size "
                              f"{own['tp_size']}, which should be equal to the engine's tensor parallel "
                              f"size {tp_size}.")
        if int(own["dp_size"]) != dp_size:
            raise ConfigError(f"KV transfer '{side}' config has a conflicting data parallel size "
                              f"{own['dp_size']}, which should be equal to the engine's data parallel "
                              f"size {dp_size}.")
    p_tp, d_tp = int(extra["prefill"]["tp_size"]), int(extra["decode"]["tp_size"])
    if int(extra["decode"].get("pp_size", 1)) != 1:
        raise ConfigError("AssertionError: decode pp size must be 1")
    if p_tp < d_tp:
        raise ConfigError(f"prefill tp_size ({p_tp}) must be greater than or equal to decode tp_size ({d_tp}).")
    if p_tp % d_tp:
        raise ConfigError(f"prefill tp_size ({p_tp}) must be divisible by decode tp_size ({d_tp}).")


def engine_id(cfg):
    """vllm-ascend appends -<uuid4 hex> once per process, so P and D never collide [facts §3]."""
    return f"{cfg['engine_id'] or uuid.uuid4()}-{uuid.uuid4().hex}"


def side_channel_port(kv_port, dp_rank, tp_size, pp_size=1, pcp_size=1):
    return kv_port + dp_rank * tp_size * pp_size * pcp_size


def handshake_ports(kv_port, dp_rank, tp_size, pp_size=1, pcp_size=1):
    """One port per worker: side_channel_port + (pp_rank*pcp + pcp_rank)*tp + tp_rank [facts §2a]."""
    base = side_channel_port(kv_port, dp_rank, tp_size, pp_size, pcp_size)
    return [base + i for i in range(tp_size * pp_size * pcp_size)]


# vLLM ModelConfig.is_moe: the first of these keys of the text config above 0 (a list: element 0).
EXPERT_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")


def is_moe(model_config):
    """vLLM's rule; None when there is no config (the lab model directory is missing)."""
    if model_config is None:
        return None
    cfg = model_config.get("text_config") if isinstance(model_config.get("text_config"), dict) else model_config
    for key in EXPERT_KEYS:
        if key in cfg:
            value = cfg[key]
            if isinstance(value, (list, tuple)):
                value = value[0] if value else 0
            return int(value or 0) > 0
    return False


def read_model_config(model):
    try:
        with open(f"{model}/config.json", encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def port_dp_ranks(dp_ranks, moe):
    """The data_parallel_rank each local DP engine uses in the port formula: vLLM keeps it for a MoE
    model and resets it to 0 for a dense one (reconfigure_for_independent_dp_rank), so dense DP engines
    on one host compute the same ports [ascend-node-facts §7]."""
    return list(dp_ranks) if moe is not False else [0 for _unused in dp_ranks]
