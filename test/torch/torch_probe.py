"""What every PyTorch check of this folder needs before it can run (symmem_check, reghook_check).

dist_nccl_missing(): None where python imports torch with torch.distributed on its NCCL backend
and torch sees a GPU; else one line saying what is missing, for the check's skip line (exit 77).
"""


def dist_nccl_missing():
    try:
        import torch
        import torch.distributed as dist
    except Exception as e:  # noqa: BLE001 - any import failure means no torch here
        return "python cannot import torch (%s)" % str(e).splitlines()[0]
    if not dist.is_available() or not dist.is_nccl_available():
        return "torch %s has no NCCL backend for torch.distributed" % torch.__version__
    if not torch.cuda.is_available():
        return "torch %s sees no GPU (torch.cuda.is_available() is False)" % torch.__version__
    return None
