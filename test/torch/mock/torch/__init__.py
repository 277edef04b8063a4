"""A stand-in for PyTorch, for test_run_mock.sh only: just enough for test/torch/run.sh's probe
and its `python3 -m torch.distributed.run` (see distributed/run.py). FAKE_TORCH=noimport makes
the import fail, FAKE_TORCH=nogpu hides the GPUs, FAKE_TORCH_GPUS sets their count (default 1)."""
import os

if os.environ.get("FAKE_TORCH") == "noimport":
    raise ImportError("fake torch: not installed")

__version__ = "0.0+fake"

from . import cuda, distributed  # noqa: E402,F401
