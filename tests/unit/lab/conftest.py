"""The stand-in's package (lab/standin/vllm_standin) importable for its unit tests, and lab/lab-hosts (a script
without .py) loaded as the module ``lab_hosts``."""
import importlib.machinery
import importlib.util
import os
import sys

import pytest

_LAB = os.path.join(os.path.dirname(__file__), "..", "..", "..", "lab")
sys.path.insert(0, os.path.join(_LAB, "standin"))


@pytest.fixture(scope="session")
def lab_hosts():
    loader = importlib.machinery.SourceFileLoader("lab_hosts", os.path.join(_LAB, "lab-hosts"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("lab_hosts", loader))
    loader.exec_module(module)
    return module
