# wpack - build, test, install. `make help` lists the targets.
include sources.mk

VERSION := 0.1.0
SOMAJOR := 0
PREFIX ?= /usr/local
CC ?= cc
BUILD ?= build
OPT ?= -O2 -g
SAN ?=
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-missing-field-initializers
CFLAGS_ALL = -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(WARN) -fPIC -fvisibility=default $(WPACK_INCLUDES) $(CFLAGS)
LDFLAGS_ALL = $(SAN) $(LDFLAGS)

LIB_OBJS := $(WPACK_LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TOOL_OBJS := $(WPACK_TOOL_SRCS:%.c=$(BUILD)/obj/%.o)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
STATIC := $(BUILD)/libwpack.a
SHARED := $(BUILD)/libwpack.so.$(VERSION)
WPACK := $(BUILD)/wpack

.PHONY: all lib tests check check-one asan-check demo deps install clean help golden
all: $(STATIC) $(SHARED) $(WPACK)
lib: $(STATIC) $(SHARED)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(STATIC): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(SHARED): $(LIB_OBJS) wpack.map
	$(CC) -shared $(LDFLAGS_ALL) -Wl,-soname,libwpack.so.$(SOMAJOR) -Wl,--version-script=wpack.map \
	    -o $@ $(LIB_OBJS) $(WPACK_LIBS)
	ln -sf libwpack.so.$(VERSION) $(BUILD)/libwpack.so.$(SOMAJOR)
	ln -sf libwpack.so.$(VERSION) $(BUILD)/libwpack.so

$(WPACK): $(TOOL_OBJS) $(STATIC)
	$(CC) $(LDFLAGS_ALL) -o $@ $(TOOL_OBJS) $(STATIC) $(WPACK_LIBS)

# Unit tests link the static library plus the packer inputs they exercise.
$(BUILD)/tests/%: tests/unit/%.c $(STATIC) $(filter $(BUILD)/obj/packer/%,$(TOOL_OBJS))
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DWPACK_HAVE_WRITER -Itests -o $@ $< $(filter $(BUILD)/obj/packer/%,$(TOOL_OBJS)) $(STATIC) $(WPACK_LIBS)

tests: $(UNIT_BINS) $(WPACK) $(SHARED)

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

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/wpack.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libwpack.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libwpack.so.$(SOMAJOR)
	ln -sf libwpack.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libwpack.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' wpack.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/wpack.pc
	install -m 755 $(WPACK) $(DESTDIR)$(PREFIX)/bin/

clean:
	rm -rf build build-asan build.check.log build-asan.check.log

# Regenerate the committed golden files on purpose (tests/tools/make_golden*.c
# say when); test_golden checks that today's writer still makes the same bytes.
golden: lib
	$(CC) $(CFLAGS_ALL) -Itests -o $(BUILD)/make_golden tests/tools/make_golden.c $(STATIC) $(WPACK_LIBS)
	$(CC) $(CFLAGS_ALL) -Itests -o $(BUILD)/make_golden11 tests/tools/make_golden11.c $(STATIC) $(WPACK_LIBS)
	$(BUILD)/make_golden tests && $(BUILD)/make_golden11 tests

help:
	@echo "make            libwpack.a, libwpack.so, wpack (in $(BUILD)/)"
	@echo "make demo       pack, inspect and verify the bundled example"
	@echo "make check      every test, normal and under ASan+UBSan; ends 'N passed, N failed'"
	@echo "make install PREFIX=/usr/local"
	@echo "make golden     regenerate tests/golden and tests/hostile (on purpose only)"

-include fuzz/fuzz.mk
-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
