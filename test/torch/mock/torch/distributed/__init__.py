"""torch.distributed of the stand-in (see ../__init__.py)."""


def is_available():
    return True


def is_nccl_available():
    return True
