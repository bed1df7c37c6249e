"""The vllm-ascend release this stand-in is installed as, and that release's facts.

lab/install-standin installs the distributions `vllm` and `vllm-ascend` (dist-info only) with the versions of the
release it mimics (lab_vllm_ascend_release), so importlib.metadata answers as on a real host; it also puts the
collection's release table next to this file (releases.py). The stand-in behaves as that release where the
collection depends on it: the KV log line (kv_log), --shutdown-timeout (shutdown_timeout), the abort-timeout
variable (abort_env, abort_default) and the dense DP rank (dense_dp_keeps_rank). A release the table does not know
behaves as the newest supported one.
"""
import importlib.metadata
import importlib.util
import os

DEFAULT = "0.23.0.post1"
_REPO_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                           "plugins", "module_utils", "common", "releases.py")


def _load_table():
    try:
        from . import releases  # copied by lab/install-standin
        return releases
    except ImportError:  # the source tree (unit tests): the collection's own table
        spec = importlib.util.spec_from_file_location("vllm_standin_releases", _REPO_TABLE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


table = _load_table()


def installed(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def version():
    """The vllm-ascend release installed (DEFAULT when the stand-in was installed without one)."""
    return installed("vllm-ascend") or DEFAULT


def facts(release=None):
    """The table entry of RELEASE (default: the installed one); the newest supported release's when unknown."""
    release = release or version()
    try:
        entry = table.find(release)
    except ValueError:
        entry = None
    return entry or table.RELEASES[table.supported_versions()[0]]


def kv_line_args(entry, request_id, ms, local_ip, device, session, blocks):
    """The format and arguments of the KV transfer line of ENTRY's connector (one KV cache group here)."""
    fmt = entry["kv_log"]
    if "groups" in fmt:
        return fmt, (request_id, ms, 1, blocks, local_ip, device, session)
    return fmt, (request_id, ms, local_ip, device, session)


def dense_keeps_rank(entry, env):
    keeps = entry["dense_dp_keeps_rank"]
    if isinstance(keeps, bool):
        return keeps
    value = str(env.get(keeps, "0")).strip()
    return value.isdigit() and int(value) != 0
