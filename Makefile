# warden — build, test, demo.
#
#   make            build everything into $(BUILD)
#   make demo       install deps, build, run the main job on embedded defaults
#   make test       install deps, build, run every test (ends "N passed, N failed")
#   make sanitize   the unit/integration tests under ASan+UBSan, concurrency
#                   tests under TSan (build-asan/, build-tsan/); make test too
#   make bench      benchmarks, each figure next to its peer tool
#   make fuzz       longer fuzz runs
#   make vmtest     BPF LSM + sandbox tests inside a guest kernel under qemu
#   make install    PREFIX=/usr/local SYSCONFDIR=/etc DESTDIR=
#   V=1             show commands; BUILD=dir for an out-of-tree build dir
#   LDFLAGS=-Ldir   the CLI's static libraries (libbpf, libseccomp, ...)
#                   from dir first; warden relinks when one of them changes

BUILD    ?= build
PREFIX   ?= /usr/local
SYSCONFDIR ?= /etc
DESTDIR  ?=
ARCH     := x86
CC       ?= gcc
CLANG    ?= clang
BPFTOOL  ?= bpftool
STRIP    ?= llvm-strip

ifeq ($(V),1)
Q :=
else
Q := @
endif

.DEFAULT_GOAL := all
# every core, unless the caller chose (-jN): `make test` on a 2-core CI node
# builds three trees (plain, ASan, TSan) before its first test
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif
.DELETE_ON_ERROR:
.SUFFIXES:

PKGS     := libbpf libseccomp yaml-0.1 jansson zlib libcrypto sqlite3 libcurl libmicrohttpd libpq libnftables
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wformat=2 -Wvla -Wno-format-truncation
CPPFLAGS += -D_GNU_SOURCE -Idaemon -I$(BUILD)/include -Ibpf $(shell pkg-config --cflags libpq 2>/dev/null)
ALL_CFLAGS = $(CFLAGS) $(WARN) -std=gnu11 -fno-strict-aliasing -MMD -MP
# no -lpq: wardend loads libpq with --fleet only (fleet/pq_lazy.c)
LDLIBS   := $(filter-out -lpq,$(shell pkg-config --libs $(PKGS) 2>/dev/null)) -lelf -lz -lpthread -lm -lresolv

# ---- BPF objects and skeletons --------------------------------------------
BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS))
BPF_SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/include/%.skel.h,$(BPF_SRCS))
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Ivmlinux/$(ARCH) -Ibpf -Wall -Werror -MMD -MP

$(BUILD)/bpf/%.tmp.o: bpf/%.bpf.c
	@mkdir -p $(@D)
	$(if $(Q),@echo "  BPF     $<")
	$(Q)$(CLANG) $(BPF_CFLAGS) -MF $(@:.o=.d) -c $< -o $@

# link (bpftool gen object), then drop DWARF; BTF stays for CO-RE
$(BPF_OBJS): $(BUILD)/bpf/%.bpf.o: $(BUILD)/bpf/%.tmp.o
	$(Q)$(BPFTOOL) gen object $@ $<
	$(Q)$(STRIP) -g $@

$(BUILD)/include/%.skel.h: $(BUILD)/bpf/%.bpf.o
	@mkdir -p $(@D)
	$(if $(Q),@echo "  SKEL    $@")
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_bpf > $@
# the object's sha256, for its pin directory (enforce/*_pin.c): taken
# here so that no one-shot `warden exec` hashes the object at run time
$(BUILD)/include/%.sha256.h: $(BUILD)/bpf/%.bpf.o
	@mkdir -p $(@D)
	$(Q)h=$$(sha256sum $< | cut -c1-64) && test $${#h} = 64 && \
	  printf '#define %s_BPF_SHA256 {%s}\n' "$$(echo $* | tr a-z- A-Z_)" \
	    "$$(echo $$h | sed 's/../0x&,/g')" > $@.tmp && mv $@.tmp $@
# the objects pinned per boot (enforce/egress_pin.c, enforce/lsm_pin.c)
BPF_SHAS := $(BUILD)/include/egress.sha256.h $(BUILD)/include/lsm.sha256.h
# a skeleton only a bench includes is still kept (not an intermediate)
.SECONDARY: $(BPF_SKELS) $(BPF_SHAS)

# ---- user space --------------------------------------------------------------
LIB_DIRS := common policy sandbox enforce trace gateway runtime broker events alert api fleet
LIB_SRCS := $(foreach d,$(LIB_DIRS),$(wildcard daemon/$(d)/*.c))
LIB_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRCS))
CLI_SRCS := $(wildcard daemon/cli/*.c)
CLI_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(CLI_SRCS))
D_SRCS   := $(wildcard daemon/wardend/*.c)
D_OBJS   := $(patsubst %.c,$(BUILD)/%.o,$(D_SRCS))
LIBWARDEN := $(BUILD)/libwarden.a
# the CLI's: every box but fleet/ (wardend's PostgreSQL client); with
# libcurl, libnftables, libcrypto and libsqlite3 loaded at their
# first call (cli/*_lazy.c): a one-shot `warden exec` loads none
CLI_LIB_OBJS := $(filter-out $(BUILD)/daemon/fleet/%,$(LIB_OBJS))
LIBWARDEN_CLI := $(BUILD)/libwarden-cli.a
# libbpf, libyaml, jansson, libseccomp, libelf and zlib linked in
# statically where their archives are installed: each shared library is
# an open, ~5 mmaps, ~10 page faults and its relocations at every start,
# and a one-shot `warden exec` is a whole process (tests/bench/bench_exec.c:
# the first three -0.3 ms of CPU a call; the last three -0.15 ms of CPU and
# -0.2 ms of wall of `warden version`, 50 runs). libc stays shared (the
# verbs that need libcurl, libnftables, libcrypto or libsqlite3 dlopen
# them: cli/*_lazy.c). Licences: libbpf's BSD-2-Clause option, MIT, MIT;
# libseccomp (LGPL-2.1) and elfutils' libelf (LGPL-3+ or GPL-2+) allow a
# static link where the user can relink with a modified library: warden
# is built from its source by this Makefile, so `make` relinks it
# (against a modified one: `make LDFLAGS=-L<its dir>`).
# lib$(1).a where `ld -Bstatic -l$(1)` of the link below finds it: the
# first -L dir holding it (LDFLAGS, then pkg-config's), else $(CC)'s own
# search; empty where there is none
CLI_LDIRS := $(patsubst -L%,%,$(filter -L%,$(LDFLAGS) $(LDLIBS)))
cli_archive = $(firstword $(wildcard $(addsuffix /lib$(1).a,$(CLI_LDIRS))) \
	      $(filter /%,$(shell $(CC) $(CFLAGS) -print-file-name=lib$(1).a)))
CLI_ARCHIVES := $(foreach l,bpf yaml jansson seccomp elf z,$(call cli_archive,$(l)))
CLI_STATIC := $(patsubst lib%.a,%,$(notdir $(CLI_ARCHIVES)))
# warden is relinked when one of those archives changes (a security update
# of libseccomp, a new archive found first): their identities (path, inode,
# size, mtime, ctime) are kept in CLI_STAMP, rewritten when they differ.
# Not their mtimes alone: dpkg installs a file with the mtime it has in
# the package (libseccomp.a here: 2024-05-25, installed 2026-12-02), so
# an update can be older than a warden linked against its predecessor;
# its inode and ctime are new.
CLI_ARCHIVES_ID := $(if $(CLI_ARCHIVES),$(shell stat -L -c '%n:%i:%s:%Y:%Z' $(CLI_ARCHIVES)))
CLI_STAMP := $(BUILD)/cli-archives.id
ifneq ($(strip $(file <$(CLI_STAMP))),$(strip $(CLI_ARCHIVES_ID)))
.PHONY: $(CLI_STAMP)
endif
$(CLI_STAMP):
	@mkdir -p $(@D)
	$(Q)printf '%s\n' '$(CLI_ARCHIVES_ID)' >$@
CLI_STATIC_LIBS := -Wl,-Bstatic $(addprefix -l,$(CLI_STATIC)) -Wl,-Bdynamic
CLI_LDLIBS = $(if $(CLI_STATIC),$(CLI_STATIC_LIBS)) \
	     $(filter-out -lcurl -lnftables -lcrypto -lsqlite3 $(addprefix -l,$(CLI_STATIC)),$(LDLIBS))

$(BUILD)/%.o: %.c | $(BPF_SKELS) $(BPF_SHAS)
	@mkdir -p $(@D)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

$(LIBWARDEN): $(LIB_OBJS)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

$(LIBWARDEN_CLI): $(CLI_LIB_OBJS)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

# --whole-archive: CLI verbs and self-registering tables live in the library
$(BUILD)/warden: $(CLI_OBJS) $(LIBWARDEN_CLI) $(CLI_STAMP)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(CLI_OBJS) -Wl,--whole-archive $(LIBWARDEN_CLI) -Wl,--no-whole-archive $(CLI_LDLIBS)

$(BUILD)/wardend: $(D_OBJS) $(LIBWARDEN)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(D_OBJS) -Wl,--whole-archive $(LIBWARDEN) -Wl,--no-whole-archive $(LDLIBS)

BINS := $(BUILD)/warden $(if $(D_SRCS),$(BUILD)/wardend)

# tier 2's pid 1 (daemon/init/warden-init.c): exec'd by G1 so that nothing
# of a call runs on the supervisor's memory; static, found next to the
# binaries or in $(PREFIX)/libexec/warden (sandbox/native_init.c); without
# libc where the source has raw system calls for the arch (its exec is
# ~0.35 ms cheaper than a static glibc one), else static glibc; never
# instrumented (no sanitizer runtime links without libc)
INIT := $(BUILD)/warden-init
INIT_MACH := $(shell $(CC) -dumpmachine 2>/dev/null)
INIT_FLAGS := $(if $(filter x86_64-% aarch64-%,$(INIT_MACH)),-nostdlib -ffreestanding -fno-stack-protector -fno-asynchronous-unwind-tables,-DWD_INIT_LIBC)
$(INIT): daemon/init/warden-init.c
	@mkdir -p $(@D)
	$(if $(Q),@echo "  STATIC  $@")
	$(Q)$(CC) $(CPPFLAGS) $(filter-out $(SAN_FLAGS_ALL),$(ALL_CFLAGS)) $(INIT_FLAGS) -static -o $@ $<

# ---- tests ---------------------------------------------------------------------
UNIT_SRCS := $(wildcard tests/unit/*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRCS))
HELPER_SRCS := $(wildcard tests/helpers/*.c)
HELPER_BINS := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(HELPER_SRCS))
FUZZ_SRCS := $(wildcard tests/fuzz/*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/tests/fuzz/%,$(FUZZ_SRCS))
BENCH_SRCS := $(wildcard tests/bench/*.c)
BENCH_BINS := $(patsubst tests/bench/%.c,$(BUILD)/tests/bench/%,$(BENCH_SRCS))

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIBWARDEN)
	@mkdir -p $(@D)
	$(if $(Q),@echo "  TEST    $@")
	$(Q)$(CC) $(CPPFLAGS) -Itests $(ALL_CFLAGS) -o $@ $< -Wl,--whole-archive $(LIBWARDEN) -Wl,--no-whole-archive $(LDLIBS)

# helpers run inside sandboxes whose filesystem may hold nothing but them
# (static: never instrumented, in a sanitizer build too)
$(BUILD)/tests/helpers/%: tests/helpers/%.c
	@mkdir -p $(@D)
	$(if $(Q),@echo "  STATIC  $@")
	$(Q)$(CC) $(CPPFLAGS) $(filter-out $(SAN_FLAGS_ALL),$(ALL_CFLAGS)) -static -o $@ $< -lpthread

# ---- sanitizer builds (make sanitize; make test runs them) --------------------
# The same sources with clang, in their own build dirs: ASan+UBSan for the
# unit and integration tests, TSan for the concurrency tests (tests/sanitize.sh
# lists them). A report fails the run: halt_on_error, and tests/run.sh turns
# any report file into a FAIL line. native_child.c and native_spawn.c are
# not instrumented: their CLONE_VM children run on the daemon's memory and
# thread state with raw system calls only (docs/HACKING.md), where a sanitizer's runtime must not
# run (it would act on the parent thread's state and on a stack it does not
# know). Under TSan that is not enough: the child still calls intercepted
# libc (close, memset) and instrumented helpers, so TSan's runtime runs in
# it on the daemon's own TSan state; a report begun there (it cannot open
# its report file as the call's uid, and dies holding TSan's report lock)
# hung the daemon's next report for good (the approval storm in CI). The
# TSan tree therefore spawns with fork(), which TSan intercepts
# (WD_TSAN_SPAWN, native_child.c and native_spawn.c); ASan and the plain
# build keep CLONE_VM.
ASAN_BUILD ?= $(BUILD)-asan
TSAN_BUILD ?= $(BUILD)-tsan
ASAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
TSAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=thread
SAN_FLAGS_ALL = -fsanitize=% -fno-sanitize-recover=%
$(BUILD)/daemon/sandbox/native_child.o $(BUILD)/daemon/sandbox/native_spawn.o: override CFLAGS := $(filter-out $(SAN_FLAGS_ALL),$(CFLAGS)) \
	$(if $(findstring -fsanitize=thread,$(CFLAGS)),-DWD_TSAN_SPAWN)
SAN_MAKE = $(MAKE) --no-print-directory CC=$(CLANG) WARN=-w
sanitize-build:
	$(Q)$(SAN_MAKE) BUILD=$(ASAN_BUILD) CFLAGS="$(ASAN_CFLAGS)" tests-build
	$(Q)$(SAN_MAKE) BUILD=$(TSAN_BUILD) CFLAGS="$(TSAN_CFLAGS)" tests-build

# libFuzzer targets (clang), built with ASan/UBSan against one instrumented
# copy of the library (compiled once, shared by every target)
FUZZ_SAN    := -fsanitize=address,undefined
FUZZ_CFLAGS := -g -O1 -D_GNU_SOURCE -Idaemon -I$(BUILD)/include -Ibpf $(shell pkg-config --cflags libpq 2>/dev/null) -std=gnu11 -MMD -MP
FUZZ_LIB_OBJS := $(patsubst %.c,$(BUILD)/fuzzobj/%.o,$(LIB_SRCS))
$(BUILD)/fuzzobj/%.o: %.c | $(BPF_SKELS)
	@mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUZZ_SAN) -c $< -o $@
$(BUILD)/libwarden-fuzz.a: $(FUZZ_LIB_OBJS)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^
$(BUILD)/tests/fuzz/%: tests/fuzz/%.c $(BUILD)/libwarden-fuzz.a
	@mkdir -p $(@D)
	$(if $(Q),@echo "  FUZZ    $@")
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $< $(BUILD)/libwarden-fuzz.a $(LDLIBS)

# skeletons: a bench may load a bench-only BPF object (bpf/bench_*.bpf.c)
$(BUILD)/tests/bench/%: tests/bench/%.c $(LIBWARDEN) | $(BPF_SKELS)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) -Itests $(ALL_CFLAGS) -o $@ $< -Wl,--whole-archive $(LIBWARDEN) -Wl,--no-whole-archive $(LDLIBS)

# ---- targets -------------------------------------------------------------------
.PHONY: all deps demo test unit-tests check-format format bench fuzz vmtest install clean sanitize sanitize-build

all: $(BINS) $(INIT)

tests-build: all $(UNIT_BINS) $(HELPER_BINS)

deps:
	$(Q)scripts/deps.sh

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) scripts/demo.sh

test: deps
	$(Q)$(MAKE) --no-print-directory tests-build $(FUZZ_BINS) sanitize-build
	$(Q)BUILD=$(BUILD) ASAN_BUILD=$(ASAN_BUILD) TSAN_BUILD=$(TSAN_BUILD) tests/run.sh

# the sanitizer part of make test alone
sanitize: deps
	$(Q)$(MAKE) --no-print-directory tests-build sanitize-build
	$(Q)BUILD=$(BUILD) ASAN_BUILD=$(ASAN_BUILD) TSAN_BUILD=$(TSAN_BUILD) ONLY_SANITIZE=1 tests/run.sh

bench: deps
	$(Q)$(MAKE) --no-print-directory tests-build $(BENCH_BINS)
	$(Q)BUILD=$(BUILD) tests/bench/run.sh

fuzz: deps
	$(Q)$(MAKE) --no-print-directory $(FUZZ_BINS)
	$(Q)BUILD=$(BUILD) FUZZ_SECONDS=$${FUZZ_SECONDS:-300} tests/fuzz/run.sh

vmtest: deps
	$(Q)BUILD=$(BUILD) scripts/vmtest.sh

FORMAT_FILES = $(shell git ls-files 'daemon/*.[ch]' 'bpf/*.[ch]' 'tests/*.[ch]' 2>/dev/null)
check-format:
	$(Q)clang-format --dry-run --Werror $(FORMAT_FILES)

format:
	$(Q)clang-format -i $(FORMAT_FILES)

# $(PREFIX)/share/warden/policy: the shipped policy, as shipped (replaced on
# every install). $(SYSCONFDIR)/warden/policy: where wardend reads its
# policy by default (daemon/wardend/main.c DEFAULT_POLICY, the systemd
# unit): seeded from the shipped one, one file at a time and only where no
# file is there yet, so a deployer's edited or added policy survives a
# reinstall. The unit goes where systemd looks under PREFIX, its paths
# rewritten to PREFIX.
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/warden/policy \
		$(DESTDIR)$(SYSCONFDIR)/warden/policy \
		$(DESTDIR)$(PREFIX)/share/doc/warden $(DESTDIR)$(PREFIX)/lib/systemd/system
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/libexec/warden
	install -m 0755 $(INIT) $(DESTDIR)$(PREFIX)/libexec/warden/
	cp -r policy/. $(DESTDIR)$(PREFIX)/share/warden/policy/
	cd policy && find . -type d | while read -r d; do \
		install -d "$(DESTDIR)$(SYSCONFDIR)/warden/policy/$$d" || exit 1; done
	cd policy && find . -type f | sed 's|^\./||' | while read -r f; do \
		t="$(DESTDIR)$(SYSCONFDIR)/warden/policy/$$f"; \
		if [ -e "$$t" ] || [ -L "$$t" ]; then \
			cmp -s "$$f" "$$t" || echo "install: keeping $$t (differs from the shipped policy/$$f)"; \
		else install -m 0644 "$$f" "$$t" || exit 1; fi; done
	install -m 0644 README.md $(DESTDIR)$(PREFIX)/share/doc/warden/
	sed 's|/usr/local|$(PREFIX)|g' scripts/wardend.service \
		>$(DESTDIR)$(PREFIX)/lib/systemd/system/wardend.service
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/system/wardend.service

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
