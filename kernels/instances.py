"""The one declarative list of Choir's kernel instances.

gen_instances.py reads this module and, filtered by the Meson option kernel_subset, writes one
CUDA source per data type (so that the types compile in parallel) and a C table that maps
(op, type) to the built instances. Adding a data type, an operator or a kernel family is an edit
here (plus the device code that the family's macro expands to); nothing else lists them.

Names are the ones kernel_subset accepts ("ops=sum,max;types=f32,bf16") and the ones used in
symbols and error messages. The enumerators must match kernels.h and nccl_types.h: the
generated table static-asserts the counts and uses the enumerators as designated indices.
"""

# (kernel_subset name, ncclDataType_t enumerator), in enumerator order.
TYPES = [
    ("i8", "ncclInt8"),
    ("u8", "ncclUint8"),
    ("i32", "ncclInt32"),
    ("u32", "ncclUint32"),
    ("i64", "ncclInt64"),
    ("u64", "ncclUint64"),
    ("f16", "ncclFloat16"),
    ("f32", "ncclFloat32"),
    ("f64", "ncclFloat64"),
    ("bf16", "ncclBfloat16"),
    ("f8e4m3", "ncclFloat8e4m3"),
    ("f8e5m2", "ncclFloat8e5m2"),
]

# (kernel_subset name, kern_op_t enumerator), in enumerator order.
OPS = [
    ("sum", "KERN_OP_SUM"),
    ("prod", "KERN_OP_PROD"),
    ("max", "KERN_OP_MAX"),
    ("min", "KERN_OP_MIN"),
    ("avg", "KERN_OP_AVG"),
    ("premulsum", "KERN_OP_PREMULSUM"),
]

ALL_TYPES = [t for t, _ in TYPES]
ALL_OPS = [o for o, _ in OPS]

# Kernel families. Each is instantiated once per (op, type) it lists and kernel_subset keeps:
#   header  the .cuh that defines the family's device code and instance macro
#   macro   expands, given (op name, type name, op enumerator, type enumerator), to one
#           extern "C" launcher named kern_<name>_launch_<op>_<type>
#   fn_type the C type of that launcher (kern_internal.h)
#   table   the [KERN_OP_NUM][ncclNumTypes] table of launchers written to kern_table.c
FAMILIES = [
    dict(
        name="rc",
        header="kern_reduce_copy.cuh",
        macro="KERN_RC_INSTANCE",
        fn_type="kern_rc_launch_fn",
        table="kern_rc_table",
        ops=ALL_OPS,
        types=ALL_TYPES,
    ),
    dict(
        name="coll_batch",
        header="kern_coll.cuh",
        macro="KERN_COLL_BATCH_INSTANCE",
        fn_type="kern_coll_batch_launch_fn",
        table="kern_coll_batch_table",
        ops=ALL_OPS,
        types=ALL_TYPES,
    ),
]
