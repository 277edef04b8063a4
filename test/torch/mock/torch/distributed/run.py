"""torchrun of the stand-in: prints, for each rank, what torch_check.py and the NCCL under it
would print, as FAKE_TORCH_SCENARIO says, so that test_run_mock.sh can see run.sh judge it.

Each rank also checks the environment run.sh promises (Choir's library first in LD_PRELOAD, the
NCCL_* settings, CHOIR_RANKS_SHARE_GPU exactly when ranks outnumber GPUs) and fails a check
otherwise. Without Choir in LD_PRELOAD it behaves as torch_check.py on NVIDIA's NCCL: NVIDIA's
banner on rank 0 and the two library checks failed.
Scenarios: pass, rank-fail (the last rank fails a check, 2 ranks or more), nvidia-banner
(NVIDIA's banner although Choir is preloaded), extra-banner (one more, NVIDIA's), missing-rank
(the last rank prints no summary, 2 ranks or more), exit-status (all pass but the launcher exits
1), hang (never finishes)."""
import os
import sys
import time


def main():
    args = sys.argv[1:]
    n = int(args[args.index("--nproc-per-node") + 1])
    scenario = os.environ.get("FAKE_TORCH_SCENARIO", "pass")
    gpus = int(os.environ.get("FAKE_TORCH_GPUS", "1"))
    lib = os.environ.get("CHOIR_EXPECT_LIB", "")
    preloaded = bool(lib) and os.environ.get("LD_PRELOAD", "").split(":")[0] == lib
    status = 0
    if scenario == "hang":
        time.sleep(600)
    for rank in range(n):
        passed = failed = 0

        def check(name, ok):
            nonlocal passed, failed
            if ok:
                passed += 1
                print("torch-check: rank %d: ok   %s" % (rank, name))
            else:
                failed += 1
                print("torch-check: rank %d: FAIL %s: wrong" % (rank, name))

        if preloaded and scenario != "nvidia-banner":
            print("host:1:1 [0] NCCL VERSION NCCL version 2.28.9 (Choir 0.1.0, CUDA 13.0)")
        elif rank == 0:
            print("NCCL version 2.28.9+cuda13.0")
        if scenario == "extra-banner" and rank == 0:
            print("NCCL version 2.28.9+cuda13.0")
        check("nccl library after init", preloaded)
        check("env NCCL_DEBUG", os.environ.get("NCCL_DEBUG") == "VERSION")
        check("env NCCL_NVLS_ENABLE", os.environ.get("NCCL_NVLS_ENABLE") == "0")
        check("env TORCH_SYMM_MEM_DISABLE_MULTICAST",
              os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST") == "1")
        share = os.environ.get("CHOIR_RANKS_SHARE_GPU")
        check("env CHOIR_RANKS_SHARE_GPU", share == ("1" if preloaded and n > gpus else None))
        if n > gpus:
            check("env CUDA_MPS_PIPE_DIRECTORY", bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")))
        last = n > 1 and rank == n - 1
        if scenario == "rank-fail" and last:
            check("all_reduce sum float32", False)
        check("nccl library at the end", preloaded)
        # An error message quoting the version is no banner.
        print("torch-check: rank %d: note: NCCL error in: x, NCCL version 2.28.9" % rank)
        if scenario == "missing-rank" and last:
            continue
        print("torch-check: rank %d: %d checks passed, %d failed" % (rank, passed, failed))
        if failed:
            status = 1
    if scenario == "exit-status":
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
