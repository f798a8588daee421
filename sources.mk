# sources.mk - which files make which library: one folder per library (plus
# format/, the shared internals of them all). Used by the Makefile, fuzz/fuzz.mk,
# fuzz/oss-fuzz/build.sh and any build that embeds wpack.
#
#   libwpack         format/ reader/ packer/   read, write, update, verify archives
#   libwpack-import  import/                   torch, safetensors, npz/tar/zip, npy,
#                                              manifest, stats JSON in; exporters out
#   libwpack-dense   kernel/                   Linear layers from mapped weights
#   libwpack-mlir    resolver/                 resolve, externalize, annotate MLIR
#   libwpack-remote  remote/                   archives on HTTP(S) and S3 (libcurl)
#   wpack (the CLI)  cli/                      argument parsing over the four
WPACK_CORE_SRCS = $(sort $(wildcard format/*.c reader/*.c packer/*.c))
WPACK_IMPORT_SRCS = $(sort $(wildcard import/*.c))
WPACK_DENSE_SRCS = $(sort $(wildcard kernel/*.c))
WPACK_MLIR_SRCS = $(sort $(wildcard resolver/*.c))
WPACK_REMOTE_SRCS = $(sort $(wildcard remote/*.c))
WPACK_CLI_SRCS = $(sort $(wildcard cli/*.c))

# What each library links beyond the ones below it.
WPACK_CORE_LIBS = -lxxhash -lzstd -lpthread -lm
WPACK_IMPORT_LIBS = -larchive -ljansson -ldeflate -lz -lm
WPACK_DENSE_LIBS = -lpthread -lm
WPACK_MLIR_LIBS = -lm
# libcurl: only libwpack-remote links it, so libwpack keeps no network/TLS dependency.
WPACK_REMOTE_LIBS = -lcurl -lpthread

# Every library's sources and every dependency (static links, fuzzing). The
# fuzzers need no network: WPACK_LIB_SRCS leaves remote/ out.
WPACK_LIB_SRCS = $(WPACK_CORE_SRCS) $(WPACK_IMPORT_SRCS) $(WPACK_DENSE_SRCS) $(WPACK_MLIR_SRCS)
WPACK_INCLUDES = -Iinclude -Iformat -Ireader -Ipacker -Iimport -Ikernel -Iresolver -Iremote -Icli
WPACK_LIBS = $(WPACK_CORE_LIBS) $(WPACK_IMPORT_LIBS) $(WPACK_DENSE_LIBS) $(WPACK_MLIR_LIBS) \
    $(WPACK_REMOTE_LIBS)
