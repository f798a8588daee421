# packer/module.mk - importers and exporters (issue 3): torch.save, safetensors,
# .npz / tar bundles, raw binaries with a JSON manifest, calibration stats,
# `wpack export`. CLI-only code.
WPACK_TOOL_SRCS += packer/zipread.c packer/pickle.c packer/torch_scan.c packer/torch_pack.c \
	packer/safetensors.c packer/safetensors_pack.c packer/safetensors_index.c packer/archive_in.c packer/manifest.c \
	packer/manifest_stats.c packer/import.c packer/import_sink.c packer/input_file.c packer/export.c
WPACK_LIBS += -larchive -ljansson
