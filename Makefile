# faultline: build, test, run, measure.
#
#   make            build build/bin/faultline, build/bin/psrt, build/bin/fl-tests
#   make check      run every test (unit and integration, real namespaces)
#   make check-unit run the unit tests only (any user, no root, seconds)
#   make check-stress  every test on a loaded machine (load average >= 4 per CPU)
#   make asan       every test under ASan+UBSan, built apart in build-asan/ (ci/asan)
#   make check-layers  the call graph: no cycle between files, no layer calling up
#   make format     apply .clang-format to every C file (make check-format: verify)
#   make run        the main job: install deps, build, run the reproducer suite
#   make bench      print BENCH lines (ratios against a baseline in the same run)
#   make fuzz       build and run the fuzz targets, FUZZ_SECONDS=600 each
#                   (FUZZ_TARGETS="index frame evline": the bundle reader,
#                   psrt's RPC frames, the event channel's lines)
#   make install    install binaries under PREFIX (default /usr/local)
#
# Each source folder becomes one static archive; binaries link the archives
# they need.  Fault points (libfiu) are compiled in unless FIU=0.  O is the
# build folder (build; `make asan` builds into build-asan with O=build-asan).

CC       ?= cc
PREFIX   ?= /usr/local
FIU      ?= 1
O        := build
PKGS     := yaml-0.1 sqlite3 libmnl libnftables libnftnl libnetfilter_queue fuse3
CFLAGS   ?= -O2 -g
override CFLAGS += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-format-truncation -Wshadow -Wvla \
            -D_GNU_SOURCE -fno-strict-aliasing -MMD -MP -I. \
            $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
ifeq ($(FIU),1)
override CFLAGS += -DFIU_ENABLE=1
endif
# The preloads go into whatever a task runs (sh, python3, a program built
# without sanitizers), where no sanitizer runtime is loaded: they are built
# without -fsanitize, whatever CFLAGS says (make asan, a user's CFLAGS).
PRELOAD_CFLAGS = $(filter-out -fsanitize% -fno-sanitize%,$(CFLAGS))
LDLIBS    = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lsnappy -lisal -lfiu -lpthread -ldl -lm

src_of    = $(filter-out $(2),$(wildcard $(1)/*.c))
obj_of    = $(patsubst %.c,$(O)/obj/%.o,$(1))

CKPT_SRC    := $(call src_of,runtime/ckpt)
PSRT_SRC    := $(call src_of,runtime/psrt,runtime/psrt/main.c)
NETEM_SRC   := $(call src_of,netem)
FUSEDISK_SRC := $(call src_of,fusedisk)
# The harness's layers, top first (docs/architecture.md): each is one archive
# and may call only the layers after it in this list.
HARNESS_LAYERS := cli soak engine load faults run scenario record sys base
REPORTS_SRC := $(call src_of,reports)
TEST_SRC    := $(wildcard harness/tests/*.c runtime/tests/*.c netem/tests/*.c reports/tests/*.c \
                         fusedisk/tests/*.c)

LIB_CKPT    := $(O)/lib/libckpt.a
LIB_PSRT    := $(O)/lib/libpsrt.a
LIB_NETEM   := $(O)/lib/libnetem.a
LIB_FUSEDISK := $(O)/lib/libfusedisk.a
LIB_HARNESS := $(foreach l,$(HARNESS_LAYERS),$(O)/lib/libfl_$(l).a)
LIB_REPORTS := $(O)/lib/libreports.a

# Link order: users before what they use.  The harness's archives link in
# layer order without a group, so a layer that called up would not link.
HARNESS_LIBS := $(LIB_HARNESS) $(LIB_REPORTS) $(LIB_NETEM) $(LIB_FUSEDISK) $(LIB_CKPT)
FL_LIBS   := $(LIB_HARNESS) $(LIB_REPORTS) $(LIB_NETEM) $(LIB_FUSEDISK) $(LIB_PSRT) $(LIB_CKPT)
PSRT_LIBS := $(LIB_PSRT) $(LIB_CKPT)

BINS := $(O)/bin/faultline $(O)/bin/psrt $(O)/bin/fl-tests $(O)/bin/fl-probe $(O)/bin/ckpt-bench \
        $(O)/bin/fl-disk-probe $(O)/bin/fusedisk-bench $(O)/bin/netem-lat-bench \
        $(O)/lib/fl_fiu_preload.so $(O)/lib/fl_clock_preload.so $(O)/lib/fl_sync_preload.so \
        $(O)/lib/fl_vdso.so

.PHONY: all deps check check-unit check-stress asan check-layers check-format print-layers format run bench fuzz \
        install clean
all: $(BINS)

# Installs missing Debian packages (a no-op when all are present).
deps:
	@bash ci/install-deps

$(O)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

define archive
$(1): $(call obj_of,$(2))
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	$$(AR) rcs $$@ $$^
endef
$(eval $(call archive,$(LIB_CKPT),$(CKPT_SRC)))
$(eval $(call archive,$(LIB_PSRT),$(PSRT_SRC)))
$(eval $(call archive,$(LIB_NETEM),$(NETEM_SRC)))
$(eval $(call archive,$(LIB_FUSEDISK),$(FUSEDISK_SRC)))
$(foreach l,$(HARNESS_LAYERS),$(eval $(call archive,$(O)/lib/libfl_$(l).a,\
    $(call src_of,harness/$(l),harness/cli/main.c))))
$(eval $(call archive,$(LIB_REPORTS),$(REPORTS_SRC)))

$(O)/bin/faultline: $(O)/obj/harness/cli/main.o $(HARNESS_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(O)/obj/harness/cli/main.o $(HARNESS_LIBS) $(LDLIBS)

# A probe that the integration tests run on hosts (no nc/python needed).
$(O)/bin/fl-probe: $(O)/obj/harness/tools/fl_probe.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^

# A disk probe the disk fault tests run on hosts (times calls, short writes).
$(O)/bin/fl-disk-probe: $(O)/obj/harness/tools/fl_disk_probe.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^

# Preloaded into the tasks a disk: fault targets (harness/faults/disk.c):
# libfiu's remote control plus the harness's state file.
$(O)/lib/fl_fiu_preload.so: harness/tools/fl_fiu_preload.c harness/tools/fl_fiu_preload.h
	@mkdir -p $(dir $@)
	$(CC) $(PRELOAD_CFLAGS) -fPIC -shared -o $@ $< -lfiu -lpthread

# Preloaded before libfaketime into the tasks of a host with clock_drift
# (harness/run/clock_offset.c): one drifting clock for all its processes.
$(O)/lib/fl_clock_preload.so: harness/tools/fl_clock_preload.c
	@mkdir -p $(dir $@)
	$(CC) $(PRELOAD_CFLAGS) -fPIC -shared -o $@ $<

# faultline's vDSO (harness/tools/fl_vdso.c, harness/sys/vclock.c): no C
# library, no relocations, one segment (fl_vdso.lds), the kernel vDSO's
# names and version.  x86-64 only: elsewhere an empty file marks it absent.
VDSO_FLAGS := -O2 -fPIC -nostdlib -shared -ffreestanding -fno-builtin -fno-stack-protector \
              -fcf-protection=none -mno-sse -mno-mmx -mno-80387 -I. -D_GNU_SOURCE -Wall -Wextra \
              -Wl,-T,harness/tools/fl_vdso.lds -Wl,--version-script,harness/tools/fl_vdso.map \
              -Wl,--hash-style=both -Wl,-soname,linux-vdso.so.1 -Wl,--no-undefined \
              -Wl,-z,max-page-size=4096 -Wl,--build-id=none
$(O)/lib/fl_vdso.so: harness/tools/fl_vdso.c harness/tools/fl_vdso.lds harness/tools/fl_vdso.map harness/sys/vclock_abi.h
	@mkdir -p $(dir $@)
	@if [ "$$(uname -m)" = x86_64 ]; then \
	  echo "$(CC) ... -o $@ harness/tools/fl_vdso.c"; \
	  $(CC) $(VDSO_FLAGS) -o $@ harness/tools/fl_vdso.c && \
	  if readelf -r $@ | grep -q 'Relocation section'; then echo "$@ has relocations" >&2; rm -f $@; exit 1; fi; \
	else : > $@; fi

# Preloaded into the tasks of a host a crash_host fault with unsynced: lose
# targets (harness/faults/durable.c): records what fsync made durable.  The store
# code is the harness's own (harness/sys/durable_store.c), hidden in the library.
$(O)/lib/fl_sync_preload.so: harness/tools/fl_sync_preload.c harness/sys/durable_store.c harness/sys/durable_store.h
	@mkdir -p $(dir $@)
	$(CC) $(PRELOAD_CFLAGS) -fPIC -shared -fvisibility=hidden -o $@ harness/tools/fl_sync_preload.c harness/sys/durable_store.c -ldl -lpthread

# The faultline filesystem's benchmark driver (bench/fusedisk.sh).
$(O)/bin/fusedisk-bench: $(O)/obj/fusedisk/bench/fusedisk_bench.o $(LIB_FUSEDISK)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(O)/obj/fusedisk/bench/fusedisk_bench.o $(LIB_FUSEDISK) $(LDLIBS)

# The link emulator's latency bounds (bench/netem.sh).
$(O)/bin/netem-lat-bench: $(O)/obj/netem/bench/netem_lat_bench.o $(LIB_NETEM)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(O)/obj/netem/bench/netem_lat_bench.o $(LIB_NETEM) $(LDLIBS) -lpthread

# The checkpoint library's benchmark driver (bench/bundle.sh).
$(O)/bin/ckpt-bench: $(O)/obj/runtime/ckpt/bench/ckpt_bench.o $(LIB_CKPT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(O)/obj/runtime/ckpt/bench/ckpt_bench.o $(LIB_CKPT) $(LDLIBS)

$(O)/bin/psrt: $(O)/obj/runtime/psrt/main.o $(PSRT_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(O)/obj/runtime/psrt/main.o $(PSRT_LIBS) $(LDLIBS)

$(O)/bin/fl-tests: $(call obj_of,$(TEST_SRC)) $(FL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(call obj_of,$(TEST_SRC)) $(FL_LIBS) $(LDLIBS) -lcunit

# Every test: CUnit registry, each test in a forked child with a timeout.
# TESTS=pattern runs the tests whose "suite/name" contains the pattern,
# LAYER=name the tests of one layer (files test_<name>_*.c).
FL_TESTS_ARGS = $(if $(LAYER),--layer $(LAYER)) $(TESTS)
check: deps
	@$(MAKE) --no-print-directory all
	@bash ci/check-layers
	@bash ci/check-format
	$(O)/bin/fl-tests $(FL_TESTS_ARGS)

# Every test with the 1-minute load average at 4 per CPU or more (8 on 2
# CPUs): ci/check-stress, STRESS_LOAD=N busy loops (default 4 per CPU); it
# prints the load average as the tests start and end.
check-stress: deps
	@$(MAKE) --no-print-directory all
	@bash ci/check-stress $(FL_TESTS_ARGS)

# Every test (what `make check` runs, TESTS and LAYER too) under
# AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer: the harness,
# the runtime, the tools and the tests built with ASAN_CFLAGS into build-asan/
# (never mixed with build/; build-asan/cflags keeps the flags it was built
# with, and other flags start it afresh), the preloads without sanitizers
# (PRELOAD_CFLAGS).  ci/asan runs build-asan/bin/fl-tests, which runs the
# programs beside it, collects every sanitizer report (the harness's tasks'
# too) in build-asan/asan-logs and fails when there is one.  The sanitizers'
# runtimes are linked into each program (GCC's -static-libasan, clang's
# default): as shared libraries they would load after the libraries the
# harness preloads into its tasks (libfiu's fiu_posix_preload.so wraps
# malloc), and ASan cannot start behind them.
ASAN_O      := build-asan
ASAN_STATIC  = $(if $(findstring clang,$(shell $(CC) --version 2>/dev/null)),,-static-libasan -static-libubsan)
ASAN_CFLAGS ?= -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
               -fno-sanitize-recover=undefined $(ASAN_STATIC)
asan: deps
	@f='$(ASAN_CFLAGS)'; [ "$$(cat $(ASAN_O)/cflags 2>/dev/null)" = "$$f" ] || \
	    { rm -rf $(ASAN_O); mkdir -p $(ASAN_O); echo "$$f" > $(ASAN_O)/cflags; }
	@$(MAKE) --no-print-directory O=$(ASAN_O) CFLAGS='$(ASAN_CFLAGS)' all
	@bash ci/asan $(ASAN_O) $(FL_TESTS_ARGS)

# The unit tests only (FL_TEST: no root, no namespaces, no psrt cluster):
# any user, in seconds.
check-unit: deps
	@$(MAKE) --no-print-directory all
	$(O)/bin/fl-tests --unit $(FL_TESTS_ARGS)

run: deps
	@$(MAKE) --no-print-directory all
	@bash ci/run-main

bench: deps
	@$(MAKE) --no-print-directory all
	@bash bench/run

fuzz:
	@FUZZ_TARGETS='$(FUZZ_TARGETS)' bash ci/fuzz $(FUZZ_SECONDS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(O)/bin/faultline $(O)/bin/psrt $(O)/bin/fl-probe $(O)/bin/fl-disk-probe $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/lib/faultline
	install -m 644 $(O)/lib/fl_fiu_preload.so $(O)/lib/fl_clock_preload.so $(O)/lib/fl_sync_preload.so $(O)/lib/fl_vdso.so $(DESTDIR)$(PREFIX)/lib/faultline/

# The call graph: no cycle between files, no harness layer calling up.
check-layers: all
	@bash ci/check-layers

print-layers:
	@echo $(HARNESS_LAYERS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

check-format:
	@bash ci/check-format

clean:
	rm -rf $(O) $(ASAN_O)

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
