# dsec: sandbox infrastructure for agentic RL, as small Linux tools.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DESTDIR ?=

CC ?= cc
PKGS = libarchive jansson libseccomp libcap libzstd libcrypto zlib
WARN = -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wwrite-strings -Wpointer-arith \
       -Wmissing-prototypes -Wstrict-prototypes -Wno-unused-parameter -Wundef -Wvla -Wno-format-truncation
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 $(WARN) -D_GNU_SOURCE -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
          -Ilibcommon $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm

B = build
TOOLS := $(patsubst cmd/%.c,%,$(wildcard cmd/dsec-*.c))
LIB_SRC := $(filter-out libcommon/seccomp-gen.c,$(wildcard libcommon/*.c))
LIB_OBJ := $(LIB_SRC:libcommon/%.c=$(B)/lib/%.o)
UNIT := $(patsubst tests/unit/%.c,$(B)/tests/%,$(wildcard tests/unit/test-*.c))
MANS := $(wildcard man/*.[1-8])

all: $(addprefix $(B)/,$(TOOLS)) $(B)/libexec/dsec-exec $(B)/dsec-holder $(UNIT) \
	$(if $(wildcard tests/probe.c),$(B)/tests/probe)

$(B)/lib/%.o: libcommon/%.c $(wildcard libcommon/*.h) | $(B)/lib
	$(CC) $(CFLAGS) -c -o $@ $<

$(B)/libcommon.a: $(LIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

# The default seccomp profile compiled to BPF once, at build time: libseccomp takes
# milliseconds for it, which every dsec-exec paid at start. seccomp-gen prints it as C.
$(B)/libcommon.a: $(B)/lib/seccomp-builtin.o

$(B)/seccomp-gen: libcommon/seccomp-gen.c $(B)/lib/seccomp.o $(B)/lib/seccomp-compact.o $(B)/lib/err.o
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(B)/gen/seccomp-builtin.c: $(B)/seccomp-gen
	@mkdir -p $(B)/gen
	$(B)/seccomp-gen > $@.tmp && mv $@.tmp $@

$(B)/lib/seccomp-builtin.o: $(B)/gen/seccomp-builtin.c
	$(CC) $(CFLAGS) -c -o $@ $<

# dsec-exec starts once per command: with its libraries linked in statically (where their .a
# files exist) libc is the only object the loader maps and relocates at each start, not four.
# libarchive stays out: dsec-exec cp loads it when it needs it.
EXEC_LIBS := $(foreach l,jansson seccomp cap,$(filter /%,$(shell $(CC) -print-file-name=lib$(l).a)))
ifeq ($(words $(EXEC_LIBS)),3)
$(B)/libexec/dsec-exec: LDLIBS = $(EXEC_LIBS) -lm
endif
# `make EXEC_STATIC=1`: libc too (another ~30 page faults and ~20% off an exec here), at a price:
# dsec-exec cp then dlopens libarchive from a static binary, which needs the very glibc it was
# built with, and libc fixes need a rebuild.
ifeq ($(EXEC_STATIC),1)
$(B)/libexec/dsec-exec: LDFLAGS += -static
$(B)/libexec/dsec-exec: LDLIBS = -ljansson -lseccomp -lcap -lm
endif

# dsec-exec is two programs: the full one (cmd/dsec-exec.c) in libexec, and, where the front
# knows the syscalls (x86_64, aarch64), a libc-free front (libcommon/front/exec-front.c) that
# does a plain foreground exec itself and hands everything else to the full one: a glibc start
# costs about half of a plain exec on a virtual machine that traps CPUID.
$(B)/libexec/dsec-exec: cmd/dsec-exec.c $(B)/libcommon.a $(wildcard libcommon/*.h) | $(B)/libexec
	$(CC) $(CFLAGS) -o $@ $< $(B)/libcommon.a $(LDFLAGS) $(LDLIBS)

ifneq ($(filter x86_64-% aarch64-%,$(shell $(CC) -dumpmachine)),)
$(B)/dsec-exec: libcommon/front/exec-front.c libcommon/caps-default.h libcommon/exec-domain.h libcommon/exec-guard.h libcommon/exec-stdio.h $(B)/gen/seccomp-builtin.c
	$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -static -nostdlib -ffreestanding -fno-builtin \
		-fno-stack-protector -fno-asynchronous-unwind-tables -o $@ \
		libcommon/front/exec-front.c $(B)/gen/seccomp-builtin.c
else
$(B)/dsec-exec: $(B)/libexec/dsec-exec
	cp $< $@
endif

$(B)/dsec-%: cmd/dsec-%.c $(B)/libcommon.a $(wildcard libcommon/*.h)
	$(CC) $(CFLAGS) -o $@ $< $(B)/libcommon.a $(LDFLAGS) $(LDLIBS)

$(B)/tests/%: tests/unit/%.c $(B)/libcommon.a $(wildcard libcommon/*.h) | $(B)/tests
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(B)/libcommon.a $(LDFLAGS) $(LDLIBS)

# pid 1 of every sandbox: static and tiny, exec'd by dsec-spawn from outside the sandbox.
# Without libc where holder.c knows the syscalls (x86_64, aarch64).
HOLDER_FLAGS = $(if $(filter x86_64-% aarch64-%,$(shell $(CC) -dumpmachine)),\
	-DDSEC_HOLDER_NOLIBC -nostdlib -ffreestanding -fno-stack-protector -fno-asynchronous-unwind-tables)
$(B)/dsec-holder: libcommon/holder/holder.c | $(B)/lib
	$(CC) -std=gnu11 -Os -Wall -Wextra -Werror -static $(HOLDER_FLAGS) -o $@ $<

# A static probe run inside sandboxes to look at them from within.
$(B)/tests/probe: tests/probe.c | $(B)/tests
	$(CC) -std=gnu11 -O2 -Wall -Werror -static -o $@ $<

$(B)/lib $(B)/tests $(B)/libexec:
	mkdir -p $@

# libFuzzer harnesses (clang), one per input parser; `make check` runs each for a bounded time.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz-*.c)
FUZZ := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))
FUZZ_CFLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE -Ilibcommon

fuzz: $(FUZZ)

$(B)/fuzz/%: tests/fuzz/%.c $(LIB_SRC) $(B)/gen/seccomp-builtin.c $(wildcard libcommon/*.h)
	@mkdir -p $(B)/fuzz
	clang $(FUZZ_CFLAGS) -o $@ $< $(LIB_SRC) $(B)/gen/seccomp-builtin.c $(LDLIBS)

deps:
	./scripts/deps.sh

check: deps
	$(MAKE) all fuzz
	./tests/run

demo: deps
	$(MAKE) all
	./scripts/demo

bench: all
	./scripts/bench

lint: all
	clang-format --dry-run --Werror $(wildcard cmd/*.c libcommon/*.c libcommon/*.h \
		libcommon/front/*.c tests/fuzz/*.c \
		tests/unit/*.c tests/unit/*.h tests/probe.c)
	shellcheck -x $(wildcard scripts/deps.sh scripts/mkimage scripts/demo scripts/bench) \
		tests/run .ci/run
	shellcheck -x -s bash tests/helpers.bash
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		--suppress=missingIncludeSystem -Ilibcommon -D_GNU_SOURCE cmd libcommon
	mandoc -Tlint -Wwarning $(MANS)

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(MANDIR)/man7
	install -m 0755 $(addprefix $(B)/,$(TOOLS)) $(DESTDIR)$(BINDIR)
	install -d $(DESTDIR)$(PREFIX)/libexec/dsec
	install -m 0755 $(B)/dsec-holder $(B)/libexec/dsec-exec $(DESTDIR)$(PREFIX)/libexec/dsec
	for m in $(MANS); do install -m 0644 $$m $(DESTDIR)$(MANDIR)/man$${m##*.}; done

clean:
	rm -rf $(B)

.PHONY: all deps check demo bench lint install clean fuzz
