"""vLLM's log line shape: `LEVEL MM-DD HH:MM:SS [file.py:line] message`, to stderr (journald)."""
import logging
import sys


class _VllmFormatter(logging.Formatter):
    def __init__(self, prefix):
        super().__init__("%(levelname)s %(asctime)s [%(source)s] %(message)s", "%m-%d %H:%M:%S")
        self.prefix = prefix

    def format(self, record):
        # The real file each message comes from, so operators grep what they would grep on NPUs.
        record.source = getattr(record, "source", record.name)
        line = super().format(record)
        return f"{self.prefix}{line}" if self.prefix else line


def setup(prefix=""):
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_VllmFormatter(prefix))
    root = logging.getLogger("vllm")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if _debug() else logging.INFO)
    root.propagate = False


def _debug():
    import os
    return os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper() == "DEBUG"


def get(source):
    """A logger whose lines carry SOURCE (e.g. 'mooncake_connector.py:302')."""
    return logging.LoggerAdapter(logging.getLogger("vllm"), {"source": source})
