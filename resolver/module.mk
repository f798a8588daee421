# resolver/module.mk - the MLIR resolver: scan MLIR text, point weight
# globals at archive entries (resolve), move inline weights out
# (externalize), attach calibration stats to ops (annotate).
WPACK_LIB_SRCS += resolver/mlir_lex.c resolver/mlir_scan.c resolver/mlir_type.c \
	resolver/uri.c resolver/suggest.c resolver/resolve.c resolver/emit.c \
	resolver/fileio.c resolver/resolve_file.c resolver/dense_decode.c resolver/attrdict.c \
	resolver/annotate.c resolver/annotate_loc.c resolver/externalize.c
# CLI-only: the --map JSON loader
WPACK_TOOL_SRCS += resolver/map_json.c
WPACK_INCLUDES += -Iresolver
WPACK_LIBS += -ljansson
