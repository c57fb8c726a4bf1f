import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))  # nvfp4_numpy

try:
    import torch
except ImportError:
    torch = None


def pytest_collection_modifyitems(config, items):
    no_torch = pytest.mark.skip(reason="torch is not installed here (CI installs no multi-GB torch): the torch layer "
                                       "runs on the GPU machine")
    no_gpu = pytest.mark.skip(reason="no CUDA GPU here: GPU tests run on the GPU machine")
    for item in items:
        if "torch_layer" in item.keywords and torch is None:
            item.add_marker(no_torch)
        if "gpu" in item.keywords and (torch is None or not torch.cuda.is_available()):
            item.add_marker(no_gpu)


def pytest_configure(config):
    config.addinivalue_line("markers", "torch_layer: needs torch")
    config.addinivalue_line("markers", "gpu: needs torch and a CUDA GPU")
