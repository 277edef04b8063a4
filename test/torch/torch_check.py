#!/usr/bin/env python3
"""torch.distributed with the NCCL backend, checked, on the library under test (Choir).

One process per rank, as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT).
Each rank uses GPU LOCAL_RANK % device_count, so ranks share the GPUs of a machine with fewer.
It runs every collective PyTorch offers on NCCL and checks every element of every result against
values computed on the host: all_reduce with each op (SUM, PRODUCT, MIN, MAX, AVG, PREMUL_SUM with
a host and a device factor) over several dtypes, broadcast, reduce, all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single (uneven splits), gather, scatter, batch_isend_irecv (a
ring both ways), barrier (every rank must have arrived before any leaves), subgroups (even and
odd ranks), a CUDA graph replaying captured collectives on new inputs, and a DDP training step
whose gradients and updated weights must match a single-process reference on the whole batch.
Inputs are small integers (exact in bfloat16 up to 16 ranks) so that results are exact; AVG on
floating types is compared within a few ulps where the rank count is not a power of two.

It fails unless the library serving those calls is the one named by CHOIR_EXPECT_LIB: right
after init and again at the end, every NCCL entry point torch uses must resolve into it, both
process-wide (what libtorch_cuda's references bind to) and in libtorch_cuda's own dependency
scope; no other libnccl.so* may be mapped, except NVIDIA's copy that torch's wheel maps by path
(reported as a note: mapped, never called), and other libnccl* files (Choir's plugins) must lie
under its directory. (run.sh also checks that only Choir printed the NCCL_DEBUG=VERSION banner.)

Prints one line per check and last "torch-check: rank R: N checks passed, M failed"; exits
nonzero on any failure. An exception in a collective ends the run at once (the ranks may no
longer agree on what comes next); the init timeout (TORCH_CHECK_DIST_TIMEOUT seconds, default
120) bounds a hang.
"""
import copy
import ctypes
import datetime
import os
import sys
import traceback

SIZES = (1, 4099)  # one element, and an odd count
BIG = (1 << 20) + 5  # a few MB: several chunks per channel


class Checks:
    """Counts and prints checks; every comparison looks at every element."""

    def __init__(self, rank):
        self.rank = rank
        self.passed = 0
        self.failed = 0

    def say(self, text):
        # One write per line: ranks share the log, and print() writes the text and its newline
        # apart when stdout is unbuffered, so two ranks' lines could run together.
        sys.stdout.write("torch-check: rank %d: %s\n" % (self.rank, text))
        sys.stdout.flush()

    def record(self, name, problems):
        if problems:
            self.failed += 1
            self.say("FAIL %s: %s" % (name, "; ".join(problems)))
        else:
            self.passed += 1
            self.say("ok   %s" % name)


def compare(torch, got, want, what, tol=None, normwise=False):
    """A problem string, or None when got equals want in every element: exactly, or within
    tol * |want| per element, or (normwise) within tol * max|want| (for sums that cancel)."""
    got = got.detach().to("cpu")
    want = want.detach().to("cpu")
    if got.shape != want.shape:
        return "%s: shape %s, want %s" % (what, tuple(got.shape), tuple(want.shape))
    if got.dtype != want.dtype:
        return "%s: dtype %s, want %s" % (what, got.dtype, want.dtype)
    if tol is None:
        bad = got != want
    else:
        g64 = got.to(torch.float64)
        w64 = want.to(torch.float64)
        bound = tol * (w64.abs().max() if normwise else w64.abs())
        bad = (g64 - w64).abs() > bound
    nbad = int(bad.sum())
    if nbad == 0:
        return None
    first = int(bad.flatten().nonzero()[0])
    return "%s: %d of %d elements wrong, first [%d] = %s, want %s" % (
        what, nbad, got.numel(), first, got.flatten()[first].item(), want.flatten()[first].item())


def mapped_files():
    """path -> list of (start, end) address ranges, from /proc/self/maps."""
    files = {}
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].startswith("/"):
                continue
            path = parts[5].rstrip("\n")
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            start, end = (int(x, 16) for x in parts[0].split("-"))
            files.setdefault(path, []).append((start, end))
    return files


# The NCCL entry points torch.distributed's NCCL backend calls (those a run of this program can
# reach); each must be served by the expected library.
TORCH_NCCL_CALLS = (
    "ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRankConfig", "ncclCommInitRank",
    "ncclCommSplit", "ncclCommDestroy", "ncclCommAbort", "ncclCommFinalize",
    "ncclCommGetAsyncError", "ncclGetErrorString", "ncclGetLastError", "ncclCommCount",
    "ncclCommUserRank", "ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather",
    "ncclReduceScatter", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd",
    "ncclRedOpCreatePreMulSum", "ncclRedOpDestroy", "ncclAlltoAll", "ncclGather", "ncclScatter",
)


def library_problems(expect, notes=None, need_torch=True):
    """Why the NCCL calls in this process are not served by exactly the expected library (empty
    list: they are). torch may map NVIDIA's copy of libnccl.so.2 by path (its wheel preloads its
    CUDA libraries); a copy that is mapped but that no call reaches is reported in notes, not as a
    problem: what counts is where the calls go. They go where the process-wide lookup leads (the
    binding of libtorch_cuda's references, the preloaded library first) and, for libtorch_cuda's
    own dependency scope, where a lookup through its handle leads; both must land in the expected
    library for every entry point torch uses (need_torch=False: the process scope alone, for tests
    without torch). run.sh adds that no other NCCL printed a banner."""
    problems = []
    want = os.path.realpath(expect)
    root = os.path.dirname(want) + os.sep
    files = mapped_files()
    if want not in files:
        problems.append("%s is not mapped" % want)
    for path in sorted(files):
        base = os.path.basename(path)
        if os.sep + os.path.join("nvidia", "nccl") + os.sep in path:
            if notes is not None:
                notes.append("NVIDIA's NCCL is mapped (unused): %s" % path)
        elif base.startswith("libnccl.so") and path != want:
            problems.append("another libnccl is mapped: %s" % path)
        elif base.startswith("libnccl") and path != want and not path.startswith(root):
            problems.append("a libnccl* file from elsewhere is mapped: %s" % path)

    def owner(addr):
        where = [p for p, ranges in files.items() if any(s <= addr < e for s, e in ranges)]
        return where[0] if len(where) == 1 else (where or "no mapped file")

    scopes = [("the process", None)]
    scopes += [("libtorch_cuda", p) for p in files if os.path.basename(p) == "libtorch_cuda.so"]
    if need_torch and len(scopes) < 2:
        problems.append("libtorch_cuda.so is not mapped: cannot check its NCCL bindings")
    for scope, path in scopes:
        lib = ctypes.CDLL(path)
        missing, elsewhere = [], []
        for name in TORCH_NCCL_CALLS:
            try:
                addr = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
            except AttributeError:
                missing.append(name)
                continue
            if owner(addr) != want:
                elsewhere.append("%s -> %s" % (name, owner(addr)))
        if missing:
            problems.append("not defined in the scope of %s: %s" % (scope, ", ".join(missing)))
        if elsewhere:
            problems.append("resolved outside %s in the scope of %s: %s"
                            % (want, scope, "; ".join(elsewhere)))
    return problems


class Run:
    def __init__(self, torch, dist, checks, rank, world, dev):
        self.torch = torch
        self.dist = dist
        self.c = checks
        self.rank = rank
        self.world = world
        self.dev = dev

    # ---- values: small integers, a function of (rank, index), known on every rank ----
    def ints(self, fn, rank, n):
        i = self.torch.arange(n, dtype=self.torch.int64)
        return fn(rank, i)

    def on_dev(self, t, dtype):
        return t.to(dtype).to(self.dev)

    def check_all_reduce(self, name, dtype, op, fn, reduce, sizes=SIZES, tol=None):
        problems = []
        for n in sizes:
            t = self.on_dev(self.ints(fn, self.rank, n), dtype)
            self.dist.all_reduce(t, op=op)
            every = self.torch.stack([self.ints(fn, r, n) for r in range(self.world)])
            want = reduce(every).to(dtype)
            p = compare(self.torch, t, want, "%d elements" % n, tol)
            if p:
                problems.append(p)
        self.c.record(name, problems)

    def all_reduce(self):
        torch, dist, world = self.torch, self.dist, self.world
        f64 = torch.float64
        dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
                  torch.int64]
        power_of_two = world & (world - 1) == 0

        def sum_vals(r, i):
            return (i * 3 + r * 5) % 11 + 1

        def prod_vals(r, i):  # 2, 1 or -1: products are signed powers of two
            return torch.tensor([2, 1, -1], dtype=torch.int64)[(i + r) % 3]

        def minmax_vals(r, i):
            return (i * 7 + r * 13) % 23 - 11

        def avg_vals(r, i):  # the average is (world + 1) * (i % 5 + 1), an integer
            return 2 * (r + 1) * (i % 5 + 1)

        for dtype in dtypes:
            tname = str(dtype).replace("torch.", "")
            floating = dtype.is_floating_point
            self.check_all_reduce("all_reduce sum %s" % tname, dtype, dist.ReduceOp.SUM,
                                  sum_vals, lambda a: a.sum(0))
            self.check_all_reduce("all_reduce product %s" % tname, dtype, dist.ReduceOp.PRODUCT,
                                  prod_vals, lambda a: a.prod(0))
            self.check_all_reduce("all_reduce min %s" % tname, dtype, dist.ReduceOp.MIN,
                                  minmax_vals, lambda a: a.amin(0))
            self.check_all_reduce("all_reduce max %s" % tname, dtype, dist.ReduceOp.MAX,
                                  minmax_vals, lambda a: a.amax(0))
            # Floating AVG multiplies by 1/world: exact only where that is a power of two.
            tol = None if (power_of_two or not floating) else 4 * torch.finfo(dtype).eps
            self.check_all_reduce("all_reduce avg %s" % tname, dtype, dist.ReduceOp.AVG,
                                  avg_vals, lambda a: a.sum(0) // world, tol=tol)

        premul = getattr(dist, "_make_nccl_premul_sum", None)
        if premul is None:
            self.c.say("note: torch.distributed has no _make_nccl_premul_sum; PREMUL_SUM not run")
        else:
            # bfloat16 left out: PyTorch hands NCCL a float host scalar for it.
            for dtype in (torch.float32, torch.float16, torch.float64):
                tname = str(dtype).replace("torch.", "")
                self.check_all_reduce("all_reduce premul_sum host factor 0.5 %s" % tname, dtype,
                                      premul(0.5), sum_vals, lambda a: a.to(f64).sum(0) * 0.5)
                factor = torch.tensor([2.0], dtype=dtype, device=self.dev)
                self.check_all_reduce("all_reduce premul_sum device factor 2 %s" % tname, dtype,
                                      premul(factor), sum_vals, lambda a: a.to(f64).sum(0) * 2)
        self.check_all_reduce("all_reduce sum float32 %d elements" % BIG, torch.float32,
                              dist.ReduceOp.SUM, sum_vals, lambda a: a.sum(0), sizes=(BIG,))

    def rooted_and_gathers(self):
        torch, dist, rank, world = self.torch, self.dist, self.rank, self.world
        k = 1031
        for dtype in (torch.float32, torch.bfloat16, torch.int64):
            tname = str(dtype).replace("torch.", "")

            def vals(r, i):  # sums of 16 stay exact in bfloat16
                return (i * 7 + r * 31) % 15 + 1

            # broadcast from the last rank
            root = world - 1
            t = self.on_dev(self.ints(vals, rank, k) if rank == root else
                            torch.full((k,), -1), dtype)
            dist.broadcast(t, src=root)
            self.c.record("broadcast root %d %s" % (root, tname),
                          [p for p in [compare(torch, t, self.ints(vals, root, k).to(dtype),
                                               "result")] if p])

            # reduce to the middle rank (only the root's result is defined), SUM and MAX
            root = world // 2
            for opname, op, red in (("sum", dist.ReduceOp.SUM, lambda a: a.sum(0)),
                                    ("max", dist.ReduceOp.MAX, lambda a: a.amax(0))):
                t = self.on_dev(self.ints(vals, rank, k), dtype)
                dist.reduce(t, dst=root, op=op)
                want = red(torch.stack([self.ints(vals, r, k) for r in range(world)])).to(dtype)
                problems = []
                if rank == root:
                    p = compare(torch, t, want, "result")
                    problems = [p] if p else []
                self.c.record("reduce %s root %d %s" % (opname, root, tname), problems)

            # all_gather_into_tensor
            out = self.on_dev(torch.full((world * k,), -1), dtype)
            dist.all_gather_into_tensor(out, self.on_dev(self.ints(vals, rank, k), dtype))
            want = torch.cat([self.ints(vals, r, k) for r in range(world)]).to(dtype)
            p = compare(torch, out, want, "result")
            self.c.record("all_gather_into_tensor %s" % tname, [p] if p else [])

            # reduce_scatter_tensor, SUM and MIN
            for opname, op, red in (("sum", dist.ReduceOp.SUM, lambda a: a.sum(0)),
                                    ("min", dist.ReduceOp.MIN, lambda a: a.amin(0))):
                out = self.on_dev(torch.full((k,), -1), dtype)
                dist.reduce_scatter_tensor(out, self.on_dev(self.ints(vals, rank, world * k),
                                                            dtype), op=op)
                every = torch.stack([self.ints(vals, r, world * k) for r in range(world)])
                want = red(every)[rank * k:(rank + 1) * k].to(dtype)
                p = compare(torch, out, want, "result")
                self.c.record("reduce_scatter_tensor %s %s" % (opname, tname), [p] if p else [])

            # all_to_all_single, uneven: rank s sends s + d + 1 elements to rank d
            def chunk(s, d):
                i = torch.arange(s + d + 1, dtype=torch.int64)
                return (s * 17 + d * 5 + i * 3) % 241 + 1

            send = torch.cat([chunk(rank, d) for d in range(world)])
            want = torch.cat([chunk(s, rank) for s in range(world)]).to(dtype)
            out = self.on_dev(torch.full((want.numel(),), -1), dtype)
            dist.all_to_all_single(out, self.on_dev(send, dtype),
                                   output_split_sizes=[s + rank + 1 for s in range(world)],
                                   input_split_sizes=[rank + d + 1 for d in range(world)])
            p = compare(torch, out, want, "result")
            self.c.record("all_to_all_single uneven %s" % tname, [p] if p else [])

            # gather to the last rank
            root = world - 1
            gl = ([self.on_dev(torch.full((k,), -1), dtype) for _ in range(world)]
                  if rank == root else None)
            dist.gather(self.on_dev(self.ints(vals, rank, k), dtype), gather_list=gl, dst=root)
            problems = []
            if rank == root:
                for r in range(world):
                    p = compare(torch, gl[r], self.ints(vals, r, k).to(dtype), "from rank %d" % r)
                    if p:
                        problems.append(p)
            self.c.record("gather root %d %s" % (root, tname), problems)

            # scatter from rank 0: rank r receives vals(r + 100)
            sl = ([self.on_dev(self.ints(vals, r + 100, k), dtype) for r in range(world)]
                  if rank == 0 else None)
            out = self.on_dev(torch.full((k,), -1), dtype)
            dist.scatter(out, scatter_list=sl, src=0)
            p = compare(torch, out, self.ints(vals, rank + 100, k).to(dtype), "result")
            self.c.record("scatter root 0 %s" % tname, [p] if p else [])

    def p2p(self):
        torch, dist, rank, world = self.torch, self.dist, self.rank, self.world
        if world < 2:
            self.c.say("note: batch_isend_irecv needs 2 ranks or more; not run")
            return
        nxt, prv = (rank + 1) % world, (rank - 1) % world

        def fwd(s):
            return (torch.arange(3001, dtype=torch.int64) * 3 + s * 7) % 199

        def bwd(s):
            return torch.arange(517, dtype=torch.int64) * 1000003 + s

        a_out = self.on_dev(fwd(rank), torch.float32)
        a_in = self.on_dev(torch.full((3001,), -1), torch.float32)
        b_out = self.on_dev(bwd(rank), torch.int64)
        b_in = self.on_dev(torch.full((517,), -1), torch.int64)
        ops = [dist.P2POp(dist.isend, a_out, nxt), dist.P2POp(dist.irecv, a_in, prv),
               dist.P2POp(dist.isend, b_out, prv), dist.P2POp(dist.irecv, b_in, nxt)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        torch.cuda.synchronize(self.dev)
        problems = [p for p in (
            compare(torch, a_in, fwd(prv).to(torch.float32), "float32 from rank %d" % prv),
            compare(torch, b_in, bwd(nxt), "int64 from rank %d" % nxt)) if p]
        self.c.record("batch_isend_irecv ring both ways", problems)

    def barrier(self):
        store = self.dist.distributed_c10d._get_default_store()
        for round_ in range(2):
            key = "torch-check-barrier-%d" % round_
            store.add(key, 1)
            self.dist.barrier()
            arrived = store.add(key, 0)
            self.c.record("barrier %d" % round_, [] if arrived == self.world else
                          ["left the barrier when %d of %d ranks had arrived" %
                           (arrived, self.world)])

    def subgroups(self):
        torch, dist, rank, world = self.torch, self.dist, self.rank, self.world
        even = list(range(0, world, 2))
        odd = list(range(1, world, 2))
        # Every rank creates every group, in the same order.
        groups = [(even, dist.new_group(ranks=even))]
        if odd:
            groups.append((odd, dist.new_group(ranks=odd)))
        for members, group in groups:
            if rank not in members:
                continue
            label = "subgroup %s" % members
            problems = []
            if dist.get_world_size(group) != len(members):
                problems.append("size %d" % dist.get_world_size(group))
            if dist.get_rank(group) != members.index(rank):
                problems.append("group rank %d" % dist.get_rank(group))

            def vals(r, i):
                return (i * 5 + r * 3) % 13 + 1

            n = 2053
            t = self.on_dev(self.ints(vals, rank, n), torch.float32)
            dist.all_reduce(t, group=group)
            want = torch.stack([self.ints(vals, r, n) for r in members]).sum(0).float()
            p = compare(torch, t, want, "all_reduce")
            if p:
                problems.append(p)
            root = members[-1]
            t = self.on_dev(self.ints(vals, rank + 50, n), torch.int64)
            dist.broadcast(t, src=root, group=group)
            p = compare(torch, t, self.ints(vals, root + 50, n), "broadcast from %d" % root)
            if p:
                problems.append(p)
            self.c.record(label + " all_reduce and broadcast", problems)

    def cuda_graph(self):
        torch, dist, rank, world = self.torch, self.dist, self.rank, self.world
        n = 8191

        def vals(r, it):
            i = torch.arange(n, dtype=torch.int64)
            return (i * 3 + r * 7 + it * 11) % 29 + 1

        x = self.on_dev(vals(rank, 0), torch.float32)
        g_out = self.on_dev(torch.zeros(world * n), torch.float32)
        # Warm up on a side stream, as PyTorch asks before a capture.
        side = torch.cuda.Stream(self.dev)
        side.wait_stream(torch.cuda.current_stream(self.dev))
        with torch.cuda.stream(side):
            dist.all_reduce(x)
            dist.all_gather_into_tensor(g_out, x)
        torch.cuda.current_stream(self.dev).wait_stream(side)
        torch.cuda.synchronize(self.dev)
        graph = torch.cuda.CUDAGraph()
        # thread_local: ProcessGroupNCCL's watchdog thread queries events during the capture.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            dist.all_reduce(x)
            dist.all_gather_into_tensor(g_out, x)
        problems = []
        for it in range(1, 6):
            x.copy_(self.on_dev(vals(rank, it), torch.float32))
            graph.replay()
            torch.cuda.synchronize(self.dev)
            total = torch.stack([vals(r, it) for r in range(world)]).sum(0).float()
            for p in (compare(torch, x, total, "replay %d all_reduce" % it),
                      compare(torch, g_out, total.repeat(world), "replay %d all_gather" % it)):
                if p:
                    problems.append(p)
        self.c.record("cuda graph: all_reduce + all_gather captured, 5 replays", problems)
        # The eager path still works after the graph.
        y = self.on_dev(vals(rank, 9), torch.float32)
        dist.all_reduce(y)
        p = compare(torch, y, torch.stack([vals(r, 9) for r in range(world)]).sum(0).float(),
                    "result")
        self.c.record("all_reduce after graph replays", [p] if p else [])
        del graph

    def ddp(self):
        torch, rank, world = self.torch, self.rank, self.world
        from torch import nn
        from torch.nn.parallel import DistributedDataParallel

        f64 = torch.float64
        torch.manual_seed(1234)
        ref = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)).to(self.dev, f64)
        model = copy.deepcopy(ref)
        if rank != 0:  # DDP must replace these with rank 0's weights
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(rank)
        ddp = DistributedDataParallel(model, device_ids=[self.dev.index])
        problems = []
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            d = compare(torch, p, q, "%s after DDP init" % name)
            if d:
                problems.append(d)
        self.c.record("ddp: weights broadcast from rank 0", problems)

        per_rank = 4
        gen = torch.Generator().manual_seed(99)
        x = torch.randn(world * per_rank, 6, dtype=f64, generator=gen).to(self.dev)
        y = torch.randn(world * per_rank, 3, dtype=f64, generator=gen).to(self.dev)
        lr = 0.1
        ref_opt = torch.optim.SGD(ref.parameters(), lr=lr)
        opt = torch.optim.SGD(ddp.parameters(), lr=lr)
        for step in range(2):
            ref_opt.zero_grad()
            nn.functional.mse_loss(ref(x), y).backward()
            opt.zero_grad()
            mine = slice(rank * per_rank, (rank + 1) * per_rank)
            nn.functional.mse_loss(ddp(x[mine]), y[mine]).backward()
            problems = []
            for (name, p), q in zip(model.named_parameters(), ref.parameters()):
                d = compare(torch, p.grad, q.grad, "grad %s" % name, tol=1e-12, normwise=True)
                if d:
                    problems.append(d)
            self.c.record("ddp step %d: gradients match the whole-batch reference" % step,
                          problems)
            ref_opt.step()
            opt.step()
            problems = []
            for (name, p), q in zip(model.named_parameters(), ref.parameters()):
                d = compare(torch, p, q, "weight %s" % name, tol=1e-12, normwise=True)
                if d:
                    problems.append(d)
            self.c.record("ddp step %d: weights after SGD match the reference" % step, problems)


def main():
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            print("torch-check: %s is not set: start me with torchrun (python3 -m "
                  "torch.distributed.run --nproc-per-node N %s)" % (var, sys.argv[0]),
                  file=sys.stderr)
            return 2
    expect = os.environ.get("CHOIR_EXPECT_LIB")
    if not expect:
        print("torch-check: CHOIR_EXPECT_LIB is not set: name the libnccl.so.2 that must serve "
              "the calls (test/torch/run.sh sets it)", file=sys.stderr)
        return 2
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    checks = Checks(rank)

    import torch
    import torch.distributed as dist

    ngpu = torch.cuda.device_count()
    if ngpu == 0:
        checks.say("FAIL no GPU visible to torch")
        return 1
    dev = torch.device("cuda", local % ngpu)
    torch.cuda.set_device(dev)
    timeout = datetime.timedelta(seconds=int(os.environ.get("TORCH_CHECK_DIST_TIMEOUT", "120")))
    dist.init_process_group("nccl", device_id=dev, timeout=timeout)
    checks.say("world %d, GPU %d of %d, torch %s, NCCL API %s" % (
        world, dev.index, ngpu, torch.__version__,
        ".".join(str(v) for v in torch.cuda.nccl.version())))
    notes = []
    checks.record("nccl library after init", library_problems(expect, notes))
    for note in notes:
        checks.say("note: " + note)

    run = Run(torch, dist, checks, rank, world, dev)
    broken = False
    for section in (run.all_reduce, run.rooted_and_gathers, run.p2p, run.barrier,
                    run.subgroups, run.cuda_graph, run.ddp):
        try:
            section()
        except Exception as e:  # noqa: BLE001 - any failure of a call is a failed check
            last = traceback.format_exception_only(type(e), e)[-1].strip()
            checks.record(section.__name__, ["raised %s" % last])
            traceback.print_exc()
            broken = True
            break
    if not broken:
        torch.cuda.synchronize(dev)
    notes = []
    checks.record("nccl library at the end", library_problems(expect, notes))
    for note in notes:
        checks.say("note: " + note)
    checks.say("%d checks passed, %d failed" % (checks.passed, checks.failed))
    sys.stdout.flush()
    if broken:
        # The ranks may disagree on what comes next: leave without a teardown that could hang.
        os._exit(1)
    dist.destroy_process_group()
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
