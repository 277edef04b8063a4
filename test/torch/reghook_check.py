#!/usr/bin/env python3
"""PyTorch's NCCL allocator hook (TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1), checked, on
the library under test (Choir), through one DDP training step.

One process per rank, as torchrun starts them; each rank uses GPU LOCAL_RANK % device_count, so
ranks may share a GPU (Choir: CHOIR_RANKS_SHARE_GPU=1, and MPS). This program sets the variable
before the process group is made. ProcessGroupNCCL then registers with each communicator of a
device (ncclCommRegister) every segment of the CUDA caching allocator there: those that exist when
the communicator is made, then each new one as it is allocated; it deregisters a segment
(ncclCommDeregister) before the allocator frees it (torch.cuda.empty_cache). PyTorch turns the
hook off where the allocator uses expandable segments: then this program skips.
Checked, every element: a DDP step on an nn.Linear (small buckets) whose gradients
must be the average of every rank's local gradients (all_gather'd; exact where the world size is
a power of two, else within a few ulps) and the same bits on every rank, and whose SGD update
(lr 0.5: exact) must match; then, after empty_cache freed and deregistered segments, an
all_reduce on a fresh 32 MiB buffer (a new segment, registered as it is made).

usage: torchrun --nproc-per-node N reghook_check.py   (under build/choir-run for Choir)
       python3 reghook_check.py --probe   exits 0 where it can run, 77 (one line) where not
Prints one line per check and last "reghook-check: rank R: P checks passed, F failed"; exits 1
on any failure, 77 without torch or a GPU, or with expandable segments.
"""
import copy
import datetime
import os
import sys

import torch_probe

os.environ["TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK"] = "1"  # read when the group is made
IN, OUT, BATCH = 256, 96, 8


def skip_reason():
    why = torch_probe.dist_nccl_missing()
    if why:
        return why
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") + os.environ.get("PYTORCH_ALLOC_CONF", "")
    if "expandable_segments:true" in conf.replace(" ", "").lower():
        return "expandable segments are on (PYTORCH_CUDA_ALLOC_CONF): PyTorch disables the hook"
    return None


def main():
    why = skip_reason()
    if why:
        print("reghook-check: skipped: " + why)
        return 77
    if "--probe" in sys.argv[1:]:
        print("reghook-check: ready")
        return 0
    if "RANK" not in os.environ:
        print("reghook-check: RANK is not set: start me with torchrun", file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    early = torch.ones(1 << 20, device=dev)  # a segment that exists before the communicator
    dist.init_process_group("nccl", device_id=dev, timeout=datetime.timedelta(
        seconds=int(os.environ.get("TORCH_CHECK_DIST_TIMEOUT", "120"))))
    passed, failed = [], []

    def say(text):
        # One write per line (ranks share the log; see torch_check.py's say).
        sys.stdout.write("reghook-check: rank %d: %s\n" % (rank, text))
        sys.stdout.flush()

    def record(name, got, want, tol=None):
        got, want = got.detach().cpu(), want.detach().cpu()
        if got.shape != want.shape:
            problem = "shape %s, want %s" % (tuple(got.shape), tuple(want.shape))
        else:
            bad = got != want if tol is None else (got.double() - want.double()).abs() > tol * (
                want.double().abs() + 1)
            problem = ("%d of %d elements wrong" % (int(bad.sum()), want.numel())
                       if bad.any() else "")
        (failed if problem else passed).append(name)
        say("FAIL %s: %s" % (name, problem) if problem else "ok   %s" % name)

    def gather(t):  # every rank's copy of t, stacked: [world, ...]
        out = torch.empty((world,) + tuple(t.shape), dtype=t.dtype, device=dev)
        dist.all_gather_into_tensor(out, t.contiguous())
        return out

    say("world %d, GPU %d, torch %s, NCCL %s" % (world, dev.index, torch.__version__,
                                               ".".join(map(str, torch.cuda.nccl.version()))))
    torch.manual_seed(1234)  # the same initial weights everywhere (DDP broadcasts rank 0's too)
    local = torch.nn.Linear(IN, OUT).to(dev)
    model = DDP(copy.deepcopy(local), device_ids=[dev.index], bucket_cap_mb=0.05)
    i = torch.arange(BATCH * IN, dtype=torch.int64).reshape(BATCH, IN)
    x = ((i * 5 + rank * 3) % 7 - 3).float().to(dev)  # small integers: exact products and sums
    j = torch.arange(BATCH * OUT, dtype=torch.int64).reshape(BATCH, OUT)
    w = ((j * 3 + rank) % 5 - 2).float().to(dev)

    (local(x) * w).sum().backward()  # this rank's own gradients, no communication
    (model(x) * w).sum().backward()  # DDP: the average over the ranks, bucket by bucket
    torch.cuda.synchronize(dev)
    tol = None if world & (world - 1) == 0 else 4 * torch.finfo(torch.float32).eps
    for (name, p), q in zip(model.module.named_parameters(), local.parameters()):
        want = gather(q.grad).double().mean(0).float()
        record("DDP %s gradient = average of local gradients" % name, p.grad, want, tol)
        every = gather(p.grad)
        record("DDP %s gradient: same bits on every rank" % name, every, every[0].expand_as(every))
    before = [p.detach().cpu().clone() for p in model.parameters()]
    grads = [p.grad.detach().cpu().clone() for p in model.parameters()]
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    for (name, p), b, g in zip(model.module.named_parameters(), before, grads):
        record("SGD step %s = before - 0.5 * gradient" % name, p, b - 0.5 * g)
        every = gather(p.detach())
        record("updated %s: same bits on every rank" % name, every, every[0].expand_as(every))

    del early, local, model, x, w, before, grads
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()  # frees segments: the hook deregisters each first
    n = 8 << 20  # 32 MiB of floats: a fresh segment, registered as it is made
    t = ((torch.arange(n, dtype=torch.int64) * 11 + rank * 7) % 13).float().to(dev)
    dist.all_reduce(t)
    k = torch.arange(n, dtype=torch.int64)
    record("all_reduce after empty_cache, %d floats" % n, t,
           sum(((k * 11 + r * 7) % 13).float() for r in range(world)))
    torch.cuda.synchronize(dev)
    say("%d checks passed, %d failed" % (len(passed), len(failed)))
    dist.destroy_process_group()
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
