# kernel/module.mk - the dense-layer kernel (scalar, AVX2, AVX-512 paths, thread
# pool) and the in-place stats updater (packer/update.c, owned here).
WPACK_LIB_SRCS += kernel/dense_bind.c kernel/dense_forward.c kernel/dense_dispatch.c \
	kernel/dense_pool.c kernel/dense_scalar.c kernel/dense_avx2.c kernel/dense_avx512.c \
	packer/update.c
# CLI-only: the layer chain behind `wpack run` and `wpack calibrate`
WPACK_TOOL_SRCS += kernel/cli_chain.c
WPACK_INCLUDES += -Ikernel
