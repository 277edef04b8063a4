#!/usr/bin/env python3
"""PyTorch symmetric memory on its NCCL backend, checked, on the library under test (Choir).

One process per rank, as torchrun starts them; each uses GPU LOCAL_RANK % device_count, so ranks
may share a GPU (Choir: CHOIR_RANKS_SHARE_GPU=1, with MPS). The backend is the one TORCH_SYMMMEM
names when set (it must be NCCL), else set_backend("NCCL"). symm_mem.empty allocates with
ncclMemAlloc; rendezvous registers the buffer and a signal pad as windows (ncclCommWindowRegister)
and makes the group's device communicator (ncclDevCommCreate), whose ncclGetLsaPointer gives the
peer pointers. Checked, every element, on small integers (exact sums): the handle's rank, world
size and peer pointers; each peer's buffer read, and the left neighbour's written, by get_buffer;
one_shot_all_reduce and two_shot_all_reduce_; all_reduce, all_gather_into_tensor and
reduce_scatter_tensor on symmetric buffers; nccl_get and nccl_put.

usage: torchrun --nproc-per-node N symmem_check.py   (under build/choir-run for Choir)
       python3 symmem_check.py --probe   exits 0 where it can run, 77 (one line) where not
Prints one line per check, last "symmem-check: rank R: P checks passed, F failed"; exits 1 on a
failure, 77 without torch, a GPU, or the NCCL symmetric-memory backend in this torch build.
"""
import datetime
import os
import sys
import traceback

import torch_probe

N = 4096  # elements per buffer: a multiple of 16 (the vector width of symm_mem's kernels)


def say(rank, text):
    # One write per line (ranks share the log; see torch_check.py's say).
    sys.stdout.write("symmem-check: rank %s: %s\n" % (rank, text))
    sys.stdout.flush()


def probe():
    """(torch, dist, symm_mem) with the NCCL backend selected, or why not (a string)."""
    why = torch_probe.dist_nccl_missing()
    if why:
        return why
    import torch
    import torch.distributed as dist
    try:
        import torch.distributed._symmetric_memory as symm_mem
        if not os.environ.get("TORCH_SYMMMEM"):  # when set, libtorch chose at load: read it back
            symm_mem.set_backend("NCCL")
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
        chosen = symm_mem.get_backend(dev) if hasattr(symm_mem, "get_backend") else "NCCL"
    except Exception as e:  # noqa: BLE001
        return "torch %s: no NCCL symmetric-memory backend (%s)" % (
            torch.__version__, str(e).strip().splitlines()[0][:200])
    if chosen != "NCCL":
        return "symmetric-memory backend is %r, not NCCL (TORCH_SYMMMEM=%s)" % (
            chosen, os.environ.get("TORCH_SYMMMEM"))
    return torch, dist, symm_mem


def main():
    got = probe()
    if isinstance(got, str) or "--probe" in sys.argv[1:]:
        print("symmem-check: " + ("skipped: " + got if isinstance(got, str) else "ready"))
        return 77 if isinstance(got, str) else 0
    if "RANK" not in os.environ:
        print("symmem-check: RANK is not set: start me with torchrun", file=sys.stderr)
        return 2
    torch, dist, symm_mem = got
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev, timeout=datetime.timedelta(
        seconds=int(os.environ.get("TORCH_CHECK_DIST_TIMEOUT", "120"))))
    dist.all_reduce(torch.ones(1, device=dev))  # the communicator exists before any rendezvous
    group = dist.group.WORLD.group_name
    f32 = torch.float32
    say(rank, "world %d, GPU %d, torch %s, NCCL %s, group %s" % (
        world, dev.index, torch.__version__, torch.cuda.nccl.version(), group))
    passed, failed = [], []

    def vals(r, n=N, k=0):  # small integers, a function of (rank, index): every sum is exact
        return ((torch.arange(n, dtype=torch.int64) * 7 + r * 13 + k) % 29 + 1).to(f32)

    def record(name, got, want):
        got = got.detach().cpu()
        bad = None if got.shape != want.shape else int((got != want).sum())
        ok = bad == 0
        (passed if ok else failed).append(name)
        say(rank, ("ok   %s" % name) if ok else "FAIL %s: %s" % (name, "shape %s, want %s" % (
            tuple(got.shape), tuple(want.shape)) if bad is None else "%d of %d elements wrong"
            % (bad, want.numel())))

    def symm(n, fill):
        t = symm_mem.empty(n, dtype=f32, device=dev)
        t.copy_(fill.to(dev))
        return t, symm_mem.rendezvous(t, group)

    def sync():
        torch.cuda.synchronize(dev)
        dist.barrier(device_ids=[dev.index])

    def handle_and_peers():
        buf, hdl = symm(2 * N, torch.cat([vals(rank), torch.zeros(N)]))
        record("handle rank and world size", torch.tensor([hdl.rank, hdl.world_size]),
               torch.tensor([rank, world]))
        ptrs = list(hdl.buffer_ptrs)  # empty where torch was built without NCCL's device API
        record("peer pointers: one a rank, distinct, none 0",
               torch.tensor([len(ptrs), len(set(ptrs) - {0})]), torch.tensor([world, world]))
        if failed:
            return
        sync()
        for p in range(world):
            record("get_buffer: read rank %d's buffer" % p,
                   hdl.get_buffer(p, (N,), f32).clone(), vals(p))
        right, left = (rank + 1) % world, (rank - 1) % world
        hdl.get_buffer(right, (N,), f32, N).copy_(vals(rank, k=5).to(dev))
        sync()
        record("get_buffer: left neighbour wrote my buffer", buf[N:], vals(left, k=5))
        record("get_buffer: my own half untouched", buf[:N], vals(rank))

    def symm_ops():
        total = sum(vals(r) for r in range(world))
        ops = torch.ops.symm_mem
        inp, _ = symm(N, vals(rank))
        record("one_shot_all_reduce sum", ops.one_shot_all_reduce(inp, "sum", group), total)
        io, _ = symm(N, vals(rank))
        record("two_shot_all_reduce_ sum", ops.two_shot_all_reduce_(io, "sum", group), total)
        for n in (N, (1 << 20) + 64 * world):  # one small, one of several chunks
            t, _ = symm(n, vals(rank, n))
            dist.all_reduce(t)
            record("all_reduce on a symmetric buffer, %d floats" % n, t,
                   sum(vals(r, n) for r in range(world)))
        src, _ = symm(N, vals(rank))
        out, _ = symm(N * world, torch.zeros(N * world))
        dist.all_gather_into_tensor(out, src)
        record("all_gather_into_tensor symmetric", out, torch.cat([vals(r) for r in range(world)]))
        src, _ = symm(N * world, vals(rank, N * world))
        out, _ = symm(N, torch.zeros(N))
        dist.reduce_scatter_tensor(out, src)
        record("reduce_scatter_tensor symmetric", out,
               sum(vals(r, N * world) for r in range(world))[rank * N:(rank + 1) * N])

    def put_get():
        ops = torch.ops.symm_mem
        if not hasattr(ops, "nccl_get") or group != "0" or world % 2:
            say(rank, "note: nccl_get/nccl_put not run (need the ops, group \"0\", even world)")
            return
        peer = rank ^ 1  # pairs (0,1), (2,3), ...: the even rank reads, the odd rank writes
        t, _ = symm(N, vals(rank))
        sync()
        if rank % 2 == 0:
            ops.nccl_get(t, peer)
        sync()
        record("nccl_get from the pair's other rank", t, vals(peer if rank % 2 == 0 else rank))
        t.copy_(vals(rank, k=3).to(dev))
        sync()
        if rank % 2:
            ops.nccl_put(t, peer)
        sync()
        record("nccl_put from the odd rank", t, vals(rank | 1, k=3))

    for section in (handle_and_peers, symm_ops, put_get):
        try:
            section()
        except Exception as e:  # noqa: BLE001 - a raising call is a failed check; stop there
            failed.append(section.__name__)
            say(rank, "FAIL %s raised %s" % (section.__name__,
                traceback.format_exception_only(type(e), e)[-1].strip()))
            traceback.print_exc()
            say(rank, "%d checks passed, %d failed" % (len(passed), len(failed)))
            os._exit(1)  # the ranks may disagree on what comes next: no teardown
    torch.cuda.synchronize(dev)
    say(rank, "%d checks passed, %d failed" % (len(passed), len(failed)))
    dist.destroy_process_group()
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
