# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which engine variables are secret, and the API key as vLLM and the example proxy read it.

vLLM 0.23 answers 401 on every path under /v1, /v2 and /inference without ``Authorization: Bearer KEY``
when VLLM_API_KEY (or --api-key) is set (vllm/entrypoints/serve/utils/server_utils.py, GUARDED_PREFIX and
AuthenticationMiddleware; api_server.py build_app); /health and /metrics stay open. vllm-ascend's example
proxy sends ``Bearer $OPENAI_API_KEY`` to P and D (examples/disaggregated_prefill_v1/
load_balance_proxy_server_example.py, check_instance_status and auth_headers), and ``vllm bench serve``
reads OPENAI_API_KEY too (vllm/benchmarks/lib/endpoint_request_func.py).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import fnmatch

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.env_file import parse_env_file
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime

# Values of these names are secret unless the operator says otherwise (vllm_pd_secret_env_names adds names).
DEFAULT_PATTERNS = ('*_KEY', '*_TOKEN', '*_SECRET', '*PASSWORD*')
HIDDEN = '<hidden>'
# the variable vLLM reads its API key from (the release table's api_key_env, the same in every release it knows)
ENGINE_KEY = runtime(None)['api_key_env']
# the variable the example proxy and `vllm bench serve` read the key they send from (the table's proxy_api_key_env)
PROXY_KEY = runtime(None)['proxy_api_key_env']
GUARDED_PREFIX = ('/v1', '/v2', '/inference')


def is_secret(name, extra=()):
    """Whether the value of environment variable NAME must never be shown: it matches DEFAULT_PATTERNS or
    one of EXTRA (names or shell patterns, as vllm_pd_secret_env_names lists them); case-insensitive."""
    upper = str(name).upper()
    return any(fnmatch.fnmatchcase(upper, str(p).upper()) for p in DEFAULT_PATTERNS + tuple(extra or ()))


def redact(env, extra=()):
    """ENV ({name: value}) with the value of every secret name replaced by HIDDEN (a new dict)."""
    return dict((k, HIDDEN if is_secret(k, extra) else v) for k, v in (env or {}).items())


def api_key(values):
    """The key an engine environment ({name: value}) or the proxy's holds: VLLM_API_KEY, else OPENAI_API_KEY,
    else '' (no key: the engines answer without one)."""
    return (values or {}).get(ENGINE_KEY) or (values or {}).get(PROXY_KEY) or ''


def api_key_of_file(path):
    """api_key() of the environment file PATH as systemd reads it (env_file.parse_env_file); '' when it does not
    exist; an unreadable file raises, since going on without the key would only end in HTTP 401. The scripts the
    roles run on hosts call it too (filter pd_host_script ships this file and env_file.py with them)."""
    try:
        with open(path) as f:
            return api_key(parse_env_file(f.read()))
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return ''
        raise


def auth_headers(key):
    """The Authorization header for KEY ({} without a key)."""
    return {'Authorization': 'Bearer %s' % key} if key else {}
