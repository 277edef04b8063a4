"""torch.cuda of the stand-in (see __init__.py)."""
import os


def is_available():
    return os.environ.get("FAKE_TORCH") != "nogpu"


def device_count():
    return int(os.environ.get("FAKE_TORCH_GPUS", "1")) if is_available() else 0
