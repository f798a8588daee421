# sources.mk - the library's sources, for this Makefile and any that embed libwpack.
WPACK_LIB_SRCS = \
	format/checksum.c format/dtype.c format/errors.c format/floats.c format/fmt.c format/names.c \
	format/write_all.c format/open_input.c format/atomic_file.c \
	reader/header.c reader/index.c reader/lookup.c reader/meta.c reader/open.c reader/stats.c \
	reader/verify.c \
	reader/decode.c reader/read.c reader/shards.c \
	packer/compress.c packer/nameset.c packer/weightstats.c packer/writer.c packer/writer_index.c \
	packer/writer_shards.c packer/copy.c
# Packer inputs used by the CLI (not exported from the shared library).
WPACK_TOOL_SRCS = $(wildcard packer/npy*.c) $(wildcard cli/*.c)
WPACK_INCLUDES = -Iinclude -Iformat -Ireader -Ipacker -Icli
WPACK_LIBS = -lxxhash -lzstd -lpthread -lm
# Parts beyond the core register themselves: each DIR/module.mk appends to
# WPACK_LIB_SRCS (exported library code) or WPACK_TOOL_SRCS (CLI-only code)
# and may add to WPACK_LIBS and WPACK_INCLUDES.
include $(sort $(wildcard */module.mk))
