"""The stand-in's package (lab/standin/vllm_standin) importable for its unit tests."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "lab", "standin"))
