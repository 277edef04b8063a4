#!/bin/sh
# Build the perf tools without the rest of Choir, against abi/nccl.h, linking an existing
# libnccl.so.2 (NVIDIA's, for instance) by its soname, so that LD_LIBRARY_PATH still chooses the
# library at run time. For validating the tools before Choir's own library builds; the Meson
# build (test/perf/meson.build) is the regular way.
#
# usage: test/perf/build-standalone.sh OUTDIR [NCCL_LIB_DIR]
#   NCCL_LIB_DIR  directory holding libnccl.so.2 to link against (default: $CUDA_HOME/lib64)
# environment:
#   CUDA_HOME   CUDA toolkit (default /usr/local/cuda)
#   CUDA_ARCH   compute capability to build the data kernels for (default 90)
#   MPICC       MPI compiler wrapper; the *_perf_mpi binaries are built when it is found
#               (default: mpicc on the PATH)
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUTDIR [NCCL_LIB_DIR]" >&2
  exit 2
fi
out=$1
cuda=${CUDA_HOME:-/usr/local/cuda}
libdir=${2:-$cuda/lib64}
arch=${CUDA_ARCH:-90}
src=$(cd "$(dirname "$0")" && pwd)
abi=$src/../../abi
if [ ! -e "$libdir/libnccl.so.2" ]; then
  echo "$0: no libnccl.so.2 in $libdir" >&2
  exit 1
fi
mkdir -p "$out/obj"
obj=$out/obj

cflags="-std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes"
incs="-I$src -I$src/../harness -I$abi -I$cuda/include"
for f in perf_opts perf_coll perf_fmt perf_world perf_run; do
  cc $cflags $incs -c "$src/$f.c" -o "$obj/$f.o"
done
"$cuda/bin/nvcc" -std=c++17 -O2 -gencode=arch=compute_$arch,code=sm_$arch -I"$src" \
  -I"$src/../harness" -c "$src/perf_data.cu" -o "$obj/perf_data.o"

mpicc=${MPICC:-$(command -v mpicc || true)}
if [ -n "$mpicc" ]; then
  mpiflags=$($mpicc --showme:compile 2>/dev/null || $mpicc -show | cut -d' ' -f2- | tr ' ' '\n' | grep '^-I' | tr '\n' ' ')
  mpilibs=$($mpicc --showme:link 2>/dev/null || $mpicc -show | cut -d' ' -f2- | tr ' ' '\n' | grep -E '^-(L|l|Wl)' | tr '\n' ' ')
  cc $cflags $incs $mpiflags -DPERF_MPI=1 -c "$src/perf_run.c" -o "$obj/perf_run_mpi.o"
  cc $cflags $incs $mpiflags -c "$src/perf_world_mpi.c" -o "$obj/perf_world_mpi.o"
fi

# -l:libnccl.so.2 links the versioned file directly (wheels ship no libnccl.so), and the
# binaries record only the soname: no RPATH or RUNPATH, LD_LIBRARY_PATH decides. The CUDA
# runtime is linked statically, so libnccl.so.2 is the only CUDA-side library they need.
libs="-L$libdir -l:libnccl.so.2 -L$cuda/lib64 -lcudart_static -lrt -lstdc++ -lpthread -ldl -lm"
common="$obj/perf_opts.o $obj/perf_coll.o $obj/perf_fmt.o $obj/perf_world.o $obj/perf_data.o"
for coll in all_reduce all_gather reduce_scatter broadcast reduce sendrecv alltoall gather scatter; do
  id=PERF_$(echo $coll | tr a-z A-Z)
  cc $cflags $incs -DPERF_COLL=$id -c "$src/perf_main.c" -o "$obj/main_$coll.o"
  cc -o "$out/${coll}_perf" "$obj/main_$coll.o" "$obj/perf_run.o" $common $libs
  if [ -n "$mpicc" ]; then
    cc -o "$out/${coll}_perf_mpi" "$obj/main_$coll.o" "$obj/perf_run_mpi.o" \
      "$obj/perf_world_mpi.o" $common $libs $mpilibs
  fi
done
echo "built the perf tools in $out (linked against $libdir/libnccl.so.2${mpicc:+, with MPI})"
