# fuzz/fuzz.mk - fuzz targets; included by the top-level Makefile, which
# provides BUILD, CC, CFLAGS_ALL, LDFLAGS_ALL, WARN, STATIC and (sources.mk)
# WPACK_LIB_SRCS, WPACK_INCLUDES, WPACK_LIBS. See fuzz/README.md.
#
#   make fuzz-replay              every target over fuzz/corpus/<target> with $(CC);
#                                 prints one "# passed N failed M" line per target
#   make fuzz                     libFuzzer binaries in build-fuzz/ (clang, ASan+UBSan,
#                                 lowered limits)
#   make fuzz-run FUZZ_SECONDS=N  each libFuzzer target for N seconds; fails on a crash
#   make fuzz-corpus              regenerate the seed corpora in fuzz/corpus/
#   make fuzz-clean               remove build-fuzz/ and the replay binaries
#   make oss-fuzz-check           fuzz/oss-fuzz/build.sh as OSS-Fuzz runs it, by hand
#   make fuzz-coverage            gcov line coverage of format/ and reader/ from the corpora

# Keep the including Makefile's default goal, wherever this file is included.
fuzz_saved_goal := $(.DEFAULT_GOAL)

BUILD ?= build
FUZZ_TARGETS := fuzz_archive fuzz_npy fuzz_roundtrip fuzz_safetensors fuzz_torch \
    fuzz_stats_json fuzz_mlir fuzz_shards fuzz_manifest fuzz_gguf fuzz_calib fuzz_response
# OSS-Fuzz's runner image has no libcurl, which fuzz_response (libwpack-remote)
# needs; it runs here (replay, make fuzz) until build.sh builds curl itself.
FUZZ_OSS_TARGETS := $(filter-out fuzz_response,$(FUZZ_TARGETS))
FUZZ_STATIC := $(if $(STATICS),$(STATICS),$(BUILD)/libwpack.a)
# Every library (importers included, sources.mk) is in the archives the
# targets link: no target needs objects of its own.
FUZZ_DEPS := $(wildcard fuzz/*.h include/*.h format/*.h reader/*.h packer/*.h import/*.h \
    remote/*.h) fuzz/fuzz.mk
FUZZ_REPLAY_BINS := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/replay_%)
FUZZ_REPLAY_TIMEOUT ?= 60

# ---------------------------------------------------------------- replay (gcc)

$(BUILD)/fuzz/replay_%: fuzz/replay.c fuzz/%.c $(FUZZ_STATIC) $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Ifuzz $(LDFLAGS_ALL) -o $@ fuzz/replay.c fuzz/$*.c \
	    $(FUZZ_STATIC) $(WPACK_LIBS)


.PHONY: fuzz-replay fuzz-replay-build fuzz fuzz-run fuzz-corpus fuzz-clean
fuzz-replay-build: $(FUZZ_REPLAY_BINS)

# Each file of each corpus in its own process (-k): a crash fails that file.
fuzz-replay: $(FUZZ_REPLAY_BINS)
	@st=0; for t in $(FUZZ_TARGETS); do \
	    $(BUILD)/fuzz/replay_$$t -k -t $(FUZZ_REPLAY_TIMEOUT) fuzz/corpus/$$t || st=1; \
	done; exit $$st

# ------------------------------------------------------------ libFuzzer (clang)

FUZZ_BUILD ?= build-fuzz
FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 60
# Extra libFuzzer flags for fuzz-run, e.g. FUZZ_FLAGS=-jobs=2 or -use_value_profile=1.
FUZZ_FLAGS ?=
# Limits a fuzz build lowers (format/layout.h), so that inputs explore logic
# rather than memory exhaustion.
FUZZ_LIMITS := -DWPK_LIMIT_ENTRIES=4096ull -DWPK_LIMIT_META=1024ull -DWPK_LIMIT_STATS=1024ull \
    -DWPK_LIMIT_ARRAY=65536ull -DWPK_LIMIT_HIST_BINS=1024u -DWPK_LIMIT_CHANNELS=4096u \
    -DWPK_LIMIT_PERCENTILES=256u -DWPK_CHUNK_LOG2_MAX=20 \
    -DWPK_WRITER_OBUF_SIZE=65536u -DWPK_WRITER_HIST_CHUNK=65536
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# The library is compiled without -Werror here: a clang-only warning in it
# should not stop the fuzzers (the targets themselves keep -Werror).
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -O1 -g $(FUZZ_SAN) $(filter-out -Werror,$(WARN)) \
    $(WPACK_INCLUDES) -Ifuzz $(FUZZ_LIMITS)
FUZZ_LIB_OBJS := $(WPACK_LIB_SRCS:%.c=$(FUZZ_BUILD)/obj/%.o) \
    $(WPACK_REMOTE_SRCS:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_LIB := $(FUZZ_BUILD)/libwpack-fuzz.a
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/%)

$(FUZZ_BUILD)/obj/fuzz/%.o: fuzz/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Werror -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/obj/fuzz/fuzz_%.o $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB) $(WPACK_LIBS)


fuzz: $(FUZZ_BINS)
# Keep the targets' objects (make would delete them as intermediates).
.SECONDARY: $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/obj/fuzz/%.o)

# Each target for FUZZ_SECONDS (fuzz/fuzz-run.sh: corpus copy, options, how a
# crash or a slow unit is judged).
fuzz-run: fuzz
	@sh fuzz/fuzz-run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) "$(FUZZ_FLAGS)" $(FUZZ_TARGETS)

# ---------------------------------------------------------------- seed corpora

$(BUILD)/fuzz/make_corpus: fuzz/make_corpus.c $(FUZZ_STATIC) $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ fuzz/make_corpus.c $(FUZZ_STATIC) \
	    $(WPACK_LIBS)

# Generated files are seed-* (and golden-*, hostile-*, cli-* copies of test
# files); anything else in fuzz/corpus (crash-*, found-*) is kept.
fuzz-corpus: $(BUILD)/fuzz/make_corpus
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p fuzz/corpus/$$t; \
	    rm -f fuzz/corpus/$$t/seed-* fuzz/corpus/$$t/golden-* fuzz/corpus/$$t/hostile-* fuzz/corpus/$$t/cli-*; \
	done
	$(BUILD)/fuzz/make_corpus fuzz/corpus
	/usr/bin/python3 fuzz/make_corpus.py fuzz/corpus
	/usr/bin/python3 fuzz/make_corpus_importers.py fuzz/corpus
	@for t in $(FUZZ_TARGETS); do echo "fuzz/corpus/$$t: $$(ls fuzz/corpus/$$t | wc -l) files"; done
	@du -sh fuzz/corpus

fuzz-clean:
	rm -rf $(FUZZ_BUILD) $(BUILD)/fuzz

# ---------------------------------------------------------------- OSS-Fuzz

# What fuzz/oss-fuzz/build.sh compiles, as shell assignments (one list of
# sources, here and in sources.mk, for make and for OSS-Fuzz).
.PHONY: fuzz-oss-vars oss-fuzz-check fuzz-coverage
fuzz-oss-vars:
	@echo "FUZZ_TARGETS='$(FUZZ_OSS_TARGETS)'"
	@echo "LIB_SRCS='$(strip $(WPACK_LIB_SRCS))'"
	@echo "INCLUDES='$(strip $(WPACK_INCLUDES))'"
	@echo "LIMITS='$(strip $(FUZZ_LIMITS))'"

# build.sh with OSS-Fuzz's variables set by hand, then each binary for 5 s.
oss-fuzz-check:
	@sh fuzz/oss-fuzz/local-check.sh

# gcov line coverage of format/ and reader/ from the corpora (build-cov/).
fuzz-coverage:
	@MAKE="$(MAKE)" sh fuzz/coverage.sh

-include $(wildcard $(FUZZ_BUILD)/obj/*/*.d)

.DEFAULT_GOAL := $(fuzz_saved_goal)
