# wpack - build, test, install. `make help` lists the targets.
include sources.mk

VERSION := 0.1.0
SOMAJOR := 0
PREFIX ?= /usr/local
# Where `make install` puts the Python package wpack (Debian's python3 reads
# /usr/lib/python3/dist-packages; for PREFIX=/usr/local it reads
# /usr/local/lib/python3.11/dist-packages: pass PYTHON_SITE=... or PYTHONPATH).
PYTHON_SITE ?= $(PREFIX)/lib/python3/dist-packages
CC ?= cc
BUILD ?= build
OPT ?= -O2 -g
SAN ?=
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-missing-field-initializers
CFLAGS_ALL = -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(WARN) -fPIC -fvisibility=default $(WPACK_INCLUDES) $(CFLAGS)
LDFLAGS_ALL = $(SAN) $(LDFLAGS)

# Five libraries, one per folder (sources.mk). Each is built static and
# shared; a shared one exports only its own header's wpack_ calls
# (tools/lib/NAME.map) and links the libraries below it plus a private,
# hidden copy of the format/ internals it uses.
CORE_OBJS := $(WPACK_CORE_SRCS:%.c=$(BUILD)/obj/%.o)
IMPORT_OBJS := $(WPACK_IMPORT_SRCS:%.c=$(BUILD)/obj/%.o)
DENSE_OBJS := $(WPACK_DENSE_SRCS:%.c=$(BUILD)/obj/%.o)
MLIR_OBJS := $(WPACK_MLIR_SRCS:%.c=$(BUILD)/obj/%.o)
REMOTE_OBJS := $(WPACK_REMOTE_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_OBJS := $(WPACK_CLI_SRCS:%.c=$(BUILD)/obj/%.o)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
LIBNAMES := wpack wpack-import wpack-dense wpack-mlir wpack-remote
STATIC := $(BUILD)/libwpack.a
# Static archives in link order (a library before the ones it uses).
STATICS := $(BUILD)/libwpack-remote.a $(BUILD)/libwpack-mlir.a $(BUILD)/libwpack-dense.a \
    $(BUILD)/libwpack-import.a $(STATIC)
SHARED := $(BUILD)/libwpack.so.$(VERSION)
SHAREDS := $(LIBNAMES:%=$(BUILD)/lib%.so.$(VERSION))
# The private copy: the format/ internals (not exported by libwpack.so) that
# the upper shared libraries link hidden; nothing of reader/ or packer/.
INTERNAL := $(BUILD)/libwpack-internal.a
WPACK := $(BUILD)/wpack

.PHONY: all lib tests check check-one asan-check demo deps install clean help golden
all: $(STATICS) $(SHAREDS) $(WPACK)
lib: $(STATICS) $(SHAREDS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(BUILD)/libwpack.a: $(CORE_OBJS)
$(BUILD)/libwpack-import.a: $(IMPORT_OBJS)
$(BUILD)/libwpack-dense.a: $(DENSE_OBJS)
$(BUILD)/libwpack-mlir.a: $(MLIR_OBJS)
$(BUILD)/libwpack-remote.a: $(REMOTE_OBJS)
$(INTERNAL): $(filter $(BUILD)/obj/format/%,$(CORE_OBJS))
$(BUILD)/%.a:
	@rm -f $@
	ar rcs $@ $^

# lib_shared NAME, OBJS, LIBS: libNAME.so.VERSION with soname libNAME.so.SOMAJOR.
# -z defs: a symbol the library needs and nothing provides fails the link.
define lib_shared
$(BUILD)/lib$(1).so.$(VERSION): $(2) tools/lib/$(1).map $(if $(filter wpack,$(1)),,$(SHARED) $(INTERNAL))
	$$(CC) -shared $$(LDFLAGS_ALL) -Wl,-z,defs -Wl,-soname,lib$(1).so.$(SOMAJOR) \
	    -Wl,--version-script=tools/lib/$(1).map -o $$@ $(2) \
	    $(if $(filter wpack,$(1)),,-L$(BUILD) -lwpack $(INTERNAL)) $(3)
	ln -sf lib$(1).so.$(VERSION) $(BUILD)/lib$(1).so.$(SOMAJOR)
	ln -sf lib$(1).so.$(VERSION) $(BUILD)/lib$(1).so
endef
$(eval $(call lib_shared,wpack,$(CORE_OBJS),$(WPACK_CORE_LIBS)))
$(eval $(call lib_shared,wpack-import,$(IMPORT_OBJS),$(WPACK_IMPORT_LIBS) $(WPACK_CORE_LIBS)))
$(eval $(call lib_shared,wpack-dense,$(DENSE_OBJS),$(WPACK_DENSE_LIBS)))
$(eval $(call lib_shared,wpack-mlir,$(MLIR_OBJS),$(WPACK_MLIR_LIBS) $(WPACK_CORE_LIBS)))
$(eval $(call lib_shared,wpack-remote,$(REMOTE_OBJS),$(WPACK_REMOTE_LIBS) $(WPACK_CORE_LIBS)))

$(WPACK): $(CLI_OBJS) $(STATICS)
	$(CC) $(LDFLAGS_ALL) -o $@ $(CLI_OBJS) $(STATICS) $(WPACK_LIBS)

# Test hooks (#ifdef WPACK_TEST_HOOKS, e.g. WPACK_UPDATE_STOP_AFTER) exist
# only in test builds: the files that have them are compiled a second time
# with the macro, into obj-hooks/, and linked before the static libraries
# into the unit tests and $(BUILD)/tests/wpack-hooks (the CLI for the tests
# that need a hook). The released libraries and wpack hold none
# (tests/cli/test_no_hooks.sh).
HOOK_SRCS := $(shell grep -l WPACK_TEST_HOOKS $(WPACK_LIB_SRCS) $(WPACK_CLI_SRCS))
HOOK_OBJS := $(HOOK_SRCS:%.c=$(BUILD)/obj-hooks/%.o)
HOOK_LIB_OBJS := $(filter-out $(BUILD)/obj-hooks/cli/%,$(HOOK_OBJS))
WPACK_HOOKS := $(BUILD)/tests/wpack-hooks

$(BUILD)/obj-hooks/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DWPACK_TEST_HOOKS -MMD -MP -c $< -o $@

$(WPACK_HOOKS): $(filter-out $(HOOK_SRCS:%.c=$(BUILD)/obj/%.o),$(CLI_OBJS)) $(HOOK_OBJS) $(STATICS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $(filter %.o,$^) $(STATICS) $(WPACK_LIBS)

# Unit tests link the five static libraries (and may test their internals);
# they include the harness and content headers of tests/, so a change there
# rebuilds them too (a stale test binary passed after golden_content.h moved).
UNIT_HEADERS := $(wildcard tests/*.h tests/tools/*.h)
$(BUILD)/tests/%: tests/unit/%.c $(UNIT_HEADERS) $(HOOK_LIB_OBJS) $(STATICS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DWPACK_HAVE_WRITER -DWPACK_TEST_HOOKS -Itests -o $@ $< $(HOOK_LIB_OBJS) $(STATICS) $(WPACK_LIBS)

tests: $(UNIT_BINS) $(WPACK) $(SHAREDS) $(WPACK_HOOKS)

deps:
	@sh tools/deps.sh

# One configuration's suite; prints "# totals P F".
check-one: tests
	@OPT="$(OPT)" SAN="$(SAN)" sh tests/run-tests.sh $(BUILD)

# The whole suite twice: a normal build, then ASan + UBSan (tests/check.sh).
check: deps
	@MAKE="$(MAKE)" sh tests/check.sh

demo: deps all
	@sh examples/demo.sh $(WPACK)

# pkg-config: each library requires the ones below it.
PC_DESC_wpack := Page-aligned archives of ML model weights with calibration statistics
PC_DESC_wpack-import := wpack importers (torch, safetensors, npz, npy, tar, zip, manifest) and exporters
PC_DESC_wpack-dense := Linear layers run straight from wpack archives
PC_DESC_wpack-mlir := Resolve, externalize and annotate MLIR against wpack archives
PC_DESC_wpack-remote := Open wpack archives on HTTP(S) servers and S3 object stores
PC_PRIV_wpack := $(WPACK_CORE_LIBS)
PC_PRIV_wpack-import := $(WPACK_IMPORT_LIBS)
PC_PRIV_wpack-dense := $(WPACK_DENSE_LIBS)
PC_PRIV_wpack-mlir := $(WPACK_MLIR_LIBS)
PC_PRIV_wpack-remote := $(WPACK_REMOTE_LIBS)
HEADER_wpack := wpack.h
HEADER_wpack-import := wpack_import.h
HEADER_wpack-dense := wpack_dense.h
HEADER_wpack-mlir := wpack_mlir.h
HEADER_wpack-remote := wpack_remote.h

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	$(foreach n,$(LIBNAMES),$(call install_lib,$(n)))
	install -m 755 $(WPACK) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PYTHON_SITE)/wpack
	install -m 644 $(filter-out %/_install.py,$(wildcard python/wpack/*.py)) $(DESTDIR)$(PYTHON_SITE)/wpack/
	echo 'LIBDIR = "$(PREFIX)/lib"' > $(DESTDIR)$(PYTHON_SITE)/wpack/_install.py

# install_lib NAME: header, static and shared library, soname links, NAME.pc.
define install_lib
$(if $(wildcard include/$(HEADER_$(1))),install -m 644 include/$(HEADER_$(1)) $(DESTDIR)$(PREFIX)/include/,true)
	install -m 644 $(BUILD)/lib$(1).a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/lib$(1).so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf lib$(1).so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/lib$(1).so.$(SOMAJOR)
	ln -sf lib$(1).so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/lib$(1).so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@NAME@|$(1)|' \
	    -e 's|@DESCRIPTION@|$(PC_DESC_$(1))|' -e 's|@PRIVATE@|$(PC_PRIV_$(1))|' \
	    -e 's|@REQUIRES@|$(if $(filter wpack,$(1)),,Requires: wpack = $(VERSION))|' \
	    tools/lib/wpack.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$(1).pc
	
endef

clean:
	rm -rf build build-asan build.check.log build-asan.check.log

# Regenerate the committed golden files on purpose (tests/tools/make_golden*.c
# say when); test_golden checks that today's writer still makes the same bytes.
golden: lib
	$(CC) $(CFLAGS_ALL) -Itests -o $(BUILD)/make_golden tests/tools/make_golden.c $(STATICS) $(WPACK_LIBS)
	$(CC) $(CFLAGS_ALL) -Itests -o $(BUILD)/make_golden11 tests/tools/make_golden11.c $(STATICS) $(WPACK_LIBS)
	$(CC) $(CFLAGS_ALL) -Itests -o $(BUILD)/make_golden12 tests/tools/make_golden12.c $(STATICS) $(WPACK_LIBS)
	$(BUILD)/make_golden tests && $(BUILD)/make_golden11 tests && $(BUILD)/make_golden12 tests

help:
	@echo "make            the five libraries (libwpack, -import, -dense, -mlir, -remote; .a and .so) and wpack, in $(BUILD)/"
	@echo "make demo       pack, inspect and verify the bundled example"
	@echo "make check      every test, normal and under ASan+UBSan; ends 'N passed, N failed'"
	@echo "make install PREFIX=/usr/local"
	@echo "make golden     regenerate tests/golden and tests/hostile (on purpose only)"

-include fuzz/fuzz.mk
-include $(shell find $(BUILD)/obj $(BUILD)/obj-hooks -name '*.d' 2>/dev/null)
