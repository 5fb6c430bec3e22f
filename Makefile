# libmasteraff
VERSION = 0.1.0
PREFIX ?= /usr/local
DEB_HOST_MULTIARCH ?= $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
LIBDIR ?= $(PREFIX)/lib/$(DEB_HOST_MULTIARCH)
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
# Where bash-completion looks for masteraff's completion (it searches
# $XDG_DATA_DIRS, by default /usr/local/share and /usr/share).
COMPLETIONSDIR ?= $(PREFIX)/share/bash-completion/completions
DESTDIR ?=

CC ?= cc
CFLAGS ?= -O2 -g
WARN = -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes
LIB_CFLAGS = $(WARN) -fPIC -fvisibility=hidden -D_FORTIFY_SOURCE=2 $(CFLAGS)
LDLIBS = -ldl -pthread

LIB = libmasteraff.so
# nginx's configuration reader (nginxconf.h): its tests, test/predict and
# fuzz/run build it without the rest of the library.
NGINXCONF_SRC = nginxconf.c nginxconf_cmdline.c nginxconf_ctx.c nginxconf_exe.c \
	nginxconf_lua.c
NGINXCONF_HDR = nginxconf.h nginxconf_private.h internal.h
LIB_SRC = shim.c decide.c channel.c sleep.c reaps.c state.c config.c memory.c \
	affinity.c brood.c report.c $(NGINXCONF_SRC) early.c autocpus.c cpuset.c \
	forkmark.c loadable.c
LIB_HDR = affinity.h autocpus.h brood.h forkmark.h internal.h loadable.h \
	nginxconf.h nginxconf_private.h report.h state.h

CMD = masteraff
# The command, in cmd/: it takes affinity.c and loadable.c from the
# library's side.
CMD_SRC = cmd/main.c cmd/cli.c cmd/run.c cmd/status.c cmd/status_procs.c \
	cmd/status_library.c cmd/status_verdict.c cmd/status_json.c \
	cmd/status_prometheus.c \
	cmd/topology.c cmd/pages.c affinity.c loadable.c
CMD_HDR = cmd/cli.h cmd/status.h cmd/pages.h affinity.h internal.h loadable.h
MANPAGES = man/masteraff.1 man/libmasteraff.7

UNIT_TESTS = test/t_cpulist test/t_topology test/t_brood test/t_nginxconf \
	test/t_autocpus
# Programs the shell tests drive (test/faults.t, test/hostile.t, ...).
TEST_PROGRAMS = test/errnos test/orphan test/mtmaster test/hostile \
	test/secure test/vforkexec test/robust
# test/predict.t compares test/predict with a real nginx.
TEST_HELPERS = $(TEST_PROGRAMS) test/predict test/blockinit.so test/slowfork.so \
	test/noio.so test/holdpin.so test/sigcount.so test/flood.so
ASAN_TESTS = $(UNIT_TESTS:test/t_%=test/asan_%)
TEST_CFLAGS = $(WARN) -g -O1 -DSRCDIR=\"$(CURDIR)\" -I.

all: $(LIB) $(CMD)

# A musl build (it needs musl's libc.so, not glibc's libc.so.6) carries an
# ELF ABI version glibc's loader does not know: preloaded by mistake in a
# glibc program, it is then ignored, with the loader's one line ("cannot
# be preloaded (ELF file ABI version invalid): ignored"), where its
# libc.so would otherwise stop the program from starting. musl's loader
# does not read that byte.
$(LIB): $(LIB_SRC) $(LIB_HDR)
	$(CC) $(CPPFLAGS) $(LIB_CFLAGS) $(LDFLAGS) -shared -Wl,-z,defs -o $@ \
		$(LIB_SRC) $(LDLIBS)
	if LC_ALL=C readelf -d $@ | grep -q 'NEEDED.*\[libc\.so\]'; then \
		printf '\001' | dd of=$@ bs=1 seek=8 conv=notrunc 2>/dev/null; fi

$(CMD): $(CMD_SRC) $(CMD_HDR)
	$(CC) $(CPPFLAGS) $(WARN) -D_FORTIFY_SOURCE=2 $(CFLAGS) $(LDFLAGS) \
		-Wl,-z,now -DLIBDIR=\"$(LIBDIR)\" -DVERSION=\"$(VERSION)\" -I. \
		-o $@ $(CMD_SRC)

test/t_%: test/t_%.c affinity.c affinity.h internal.h test/tap.h
	$(CC) $(TEST_CFLAGS) -o $@ $(filter %.c,$^)

# The leader rule's test links it, and the reports' (in t_cpulist) theirs
# (as their asan_ builds below).
test/t_brood test/asan_brood: brood.c brood.h report.c report.h
test/t_cpulist test/asan_cpulist: report.c report.h

# The configuration reader's test links it too (as its asan_ build below).
test/t_nginxconf: test/t_nginxconf.c $(NGINXCONF_SRC) $(NGINXCONF_HDR) \
		affinity.c affinity.h test/tap.h
	$(CC) $(TEST_CFLAGS) -o $@ $< $(NGINXCONF_SRC) affinity.c

$(TEST_PROGRAMS): test/%: test/%.c report.h test/helpers.h
	$(CC) $(WARN) -g -O1 -pthread -o $@ $< -ldl

test/predict: test/predict.c $(NGINXCONF_SRC) $(NGINXCONF_HDR) affinity.c \
		affinity.h
	$(CC) $(TEST_CFLAGS) -o $@ $< $(NGINXCONF_SRC) affinity.c

test/blockinit.so: test/blockinit.c
	$(CC) $(WARN) -g -O1 -fPIC -shared -o $@ $<

test/slowfork.so: test/slowfork.c
	$(CC) $(WARN) -g -O1 -fPIC -shared -o $@ $< -ldl

test/noio.so: test/noio.c
	$(CC) $(WARN) -g -O1 -fPIC -shared -o $@ $< -ldl

test/sigcount.so: test/sigcount.c
	$(CC) $(WARN) -g -O1 -fPIC -shared -o $@ $< -ldl

test/flood.so: test/flood.c report.c report.h
	$(CC) $(WARN) -g -O1 -fPIC -shared -o $@ $< report.c -ldl

test/holdpin.so: test/holdpin.c
	$(CC) $(WARN) -g -O1 -fPIC -shared -o $@ $< -ldl

# The unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer.
test/asan_%: test/t_%.c affinity.c affinity.h test/tap.h
	$(CC) $(TEST_CFLAGS) -fsanitize=address,undefined -fno-sanitize-recover=all -o $@ $(filter %.c,$^)

test/asan_nginxconf: test/t_nginxconf.c $(NGINXCONF_SRC) $(NGINXCONF_HDR) \
		affinity.c affinity.h test/tap.h
	$(CC) $(TEST_CFLAGS) -fsanitize=address,undefined -fno-sanitize-recover=all -o $@ $< $(NGINXCONF_SRC) affinity.c

# The library and the command cross-built for arm64 in build-arm64/, from a
# copy of the sources so that the native build is left alone (CI and
# test/vm-arm64.t).
ARM64_CC = aarch64-linux-gnu-gcc
ARM64_SRC = Makefile $(sort $(LIB_SRC) $(CMD_SRC) $(LIB_HDR) $(CMD_HDR))
arm64:
	mkdir -p build-arm64
	cp -p --parents $(ARM64_SRC) build-arm64/
	$(MAKE) -C build-arm64 CC=$(ARM64_CC) \
		DEB_HOST_MULTIARCH=aarch64-linux-gnu PREFIX=$(PREFIX) $(LIB) $(CMD)

# The library and the command built against musl (Alpine's libc, as in
# the nginx:alpine image) in build-musl/, from a copy of the sources as for
# arm64 (CI and test/musl.t). Alpine has no multiarch directory: the
# command looks for the library in $(PREFIX)/lib.
MUSL_CC = musl-gcc
musl:
	mkdir -p build-musl
	cp -p --parents $(ARM64_SRC) build-musl/
	$(MAKE) -C build-musl CC=$(MUSL_CC) LIBDIR=$(PREFIX)/lib \
		PREFIX=$(PREFIX) $(LIB) $(CMD)

# What the Kubernetes injector image (examples/kubernetes/Containerfile)
# copies into a pod, in build-injector/: the library and libnuma.so.1 for
# glibc and for musl (glibc/, musl/), and the command linked statically
# against musl (bin/), which runs in an image of either libc. Debian has
# no musl libnuma: it is built from numactl's source, unpacked in
# NUMACTL_SRC (apt-get source numactl), with the kernel's headers, which
# musl-gcc does not look for by itself.
INJECTOR = build-injector
NUMACTL_SRC ?= $(error NUMACTL_SRC: the unpacked source of numactl (apt-get source numactl))
NUMA_GLIBC = /usr/lib/$(DEB_HOST_MULTIARCH)/libnuma.so.1
injector: $(LIB) musl
	rm -rf $(INJECTOR)
	mkdir -p $(INJECTOR)/glibc $(INJECTOR)/musl $(INJECTOR)/bin \
		$(INJECTOR)/cmd $(INJECTOR)/numa-include
	cp $(LIB) $(INJECTOR)/glibc/
	cp -L $(NUMA_GLIBC) $(INJECTOR)/glibc/libnuma.so.1
	cp build-musl/$(LIB) $(INJECTOR)/musl/
	cp -p --parents $(ARM64_SRC) $(INJECTOR)/cmd/
	$(MAKE) -C $(INJECTOR)/cmd CC=$(MUSL_CC) LDFLAGS=-static \
		LIBDIR=/masteraff/musl $(CMD)
	cp $(INJECTOR)/cmd/$(CMD) $(INJECTOR)/bin/
	ln -s /usr/include/linux /usr/include/asm-generic \
		/usr/include/$(DEB_HOST_MULTIARCH)/asm $(INJECTOR)/numa-include/
	: >$(INJECTOR)/numa-include/config.h
	cd $(NUMACTL_SRC) && $(MUSL_CC) -O2 -fPIC -shared \
		-I$(CURDIR)/$(INJECTOR)/numa-include -Wl,-soname,libnuma.so.1 \
		-Wl,--version-script,versions.ldscript -Wl,-init,numa_init \
		-Wl,-fini,numa_fini -o $(CURDIR)/$(INJECTOR)/musl/libnuma.so.1 \
		libnuma.c syscall.c distance.c affinity.c sysfs.c rtnetlink.c
	rm -rf $(INJECTOR)/cmd $(INJECTOR)/numa-include

# What the tests need on Debian 12 (CI runs this as root). The arm64 ones:
# the cross compiler, libc6-dev:arm64 for dpkg-buildpackage -a arm64
# (dpkg-shlibdeps reads libc6:arm64's symbols), qemu for the arm64 guests
# and UEFI firmware for their ACPI boot. The guests' own arm64 packages
# are downloaded by test/vm/prepare, never installed. wrk for
# scripts/crosschip in the guests. musl-tools for make musl and a musl
# nginx (test/musl.t). podman (runc: crun refuses a mixed cgroup setup)
# and debootstrap build and run examples/docker/Dockerfile (test/image.t),
# make the Debian 13 chroot (test/package-trixie.t) and run the Kubernetes
# manifests (test/kube.t: python3-yaml for test/kube-manifest). prometheus
# for promtool, which checks status --prometheus (test/prometheus.t). strace
# counts the master's socket pairs, kcmp calls and fdinfo reads (test/kcmp.t).
# hyperfine times the starts in scripts/bench, which a fresh clone runs too.
# gnuplot draws the benchmarks' figures (make plots).
TEST_DEPS = $(QUICK_DEPS) build-essential clang valgrind qemu-system-x86 busybox-static cpio \
	xz-utils debhelper lintian uwsgi-core libclang-rt-14-dev bash-completion \
	wrk crossbuild-essential-arm64 libc6-dev:arm64 qemu-system-arm \
	qemu-efi-aarch64 musl-tools libnginx-mod-http-lua libnginx-mod-http-ndk \
	podman runc debootstrap uidmap slirp4netns fuse-overlayfs python3-yaml \
	prometheus strace hyperfine gnuplot-nox

# What the library, its command and the quick tests need (make
# check-quick): a compiler, Debian's nginx, curl, the process tools, ss
# (iproute2: a minimal image has none) and perl for prove.
QUICK_DEPS = gcc make libc6-dev nginx-light curl procps psmisc iproute2 \
	numactl libnuma1 groff-base python3 perl

# The quick tests: the unit tests natively and under the sanitizers, and
# the shell tests that need nothing but nginx and a few seconds each.
QUICK_TESTS = test/follow.t test/modes.t test/reloads.t test/early.t \
	test/status.t test/command.t test/upgrade.t test/readme.t test/docs.t

# make deps says what it is about to do before it does it: it changes
# dpkg's architectures and installs a lot.
deps:
	@echo "== make deps: every test's and benchmark's tools. It adds the arm64"
	@echo "   architecture to dpkg (cross builds) and, on a minimal Debian 12,"
	@echo "   downloads about 770 MB (3.6 GB on disk): podman, qemu for x86 and"
	@echo "   arm64 guests, cross compilers, clang, valgrind, prometheus, ..."
	@echo "   For the library and its quick tests alone (90 MB, 370 MB on disk):"
	@echo "   make deps-quick, then make check-quick."
	dpkg --add-architecture arm64
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(TEST_DEPS)

deps-quick:
	@echo "== make deps-quick: installs $(QUICK_DEPS)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(QUICK_DEPS)

# groff -ww exits 0 even when it warns: any output is a warning.
man-check: $(MANPAGES)
	@for m in $(MANPAGES); do \
		out=$$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z $$m 2>&1); \
		[ -z "$$out" ] || { echo "$$m: $$out"; exit 1; }; \
	done

# Unit tests natively and under sanitizers, then the shell tests that drive
# a real nginx (and, with qemu, real kernels with emulated topologies).
check: all man-check $(UNIT_TESTS) $(ASAN_TESTS) $(TEST_HELPERS)
	prove -v --timer -e '' $(UNIT_TESTS) $(ASAN_TESTS) test/*.t

# A minute or two, with make deps-quick's packages alone.
check-quick: all man-check $(UNIT_TESTS) $(ASAN_TESTS) $(TEST_HELPERS)
	prove --timer -e '' $(UNIT_TESTS) $(ASAN_TESTS) $(QUICK_TESTS)

# What CI runs, as CI runs it: make deps, both compilers, the arm64 and
# musl builds, the server matrix when its sources are there, make check
# and the fuzzers.
ci:
	bash .ci/run

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(BINDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7 \
		$(DESTDIR)$(COMPLETIONSDIR)
	install -m 0644 $(LIB) $(DESTDIR)$(LIBDIR)/$(LIB)
	install -m 0755 $(CMD) $(DESTDIR)$(BINDIR)/$(CMD)
	install -m 0644 man/masteraff.1 $(DESTDIR)$(MANDIR)/man1/masteraff.1
	install -m 0644 man/libmasteraff.7 $(DESTDIR)$(MANDIR)/man7/libmasteraff.7
	install -m 0644 completion/masteraff $(DESTDIR)$(COMPLETIONSDIR)/masteraff
	@if [ -z "$(DESTDIR)" ] && [ "$(PREFIX)" != /usr ] && [ -e /usr/bin/masteraff ]; then \
		echo "make install: the package's /usr/bin/masteraff is installed too;"; \
		echo "  $(BINDIR)/masteraff comes first in PATH (type -a masteraff):"; \
		echo "  keep one, make uninstall or dpkg -r masteraff"; fi

# What make install put there, with the same PREFIX and DESTDIR.
uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(LIB) $(DESTDIR)$(BINDIR)/$(CMD) \
		$(DESTDIR)$(MANDIR)/man1/masteraff.1 \
		$(DESTDIR)$(MANDIR)/man7/libmasteraff.7 \
		$(DESTDIR)$(COMPLETIONSDIR)/masteraff

# The benchmarks' figures (docs/bench/*.tsv, written by scripts/scale,
# scripts/floor and scripts/crosschip --data) drawn as SVG beside them.
plots:
	scripts/plots

demo:
	scripts/demo

# libFuzzer on the cpulist parser, the report decoder, the topology reader
# and the nginx configuration reader, FUZZ_SECONDS each; fails on any
# finding (CI runs it).
FUZZ_SECONDS ?= 60
fuzz:
	fuzz/run $(FUZZ_SECONDS)

# A Debian package in the parent directory, ../masteraff_$(VERSION)-1_ARCH.deb
# (test/package.t builds one in a copy of the tree). It takes debhelper,
# installed here when missing, as make demo installs what it needs.
DEB_DEPS = debhelper dpkg-dev build-essential

deb:
	@command -v dh >/dev/null && command -v dpkg-buildpackage >/dev/null || { \
		echo "== installing $(DEB_DEPS)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq $(DEB_DEPS) >/dev/null; }
	dpkg-buildpackage -us -uc -b

clean:
	rm -f $(LIB) $(CMD) $(UNIT_TESTS) $(ASAN_TESTS) $(TEST_HELPERS)
	rm -rf build-arm64 build-musl $(INJECTOR)

.PHONY: all deps deps-quick man-check check check-quick ci install uninstall \
	plots demo fuzz deb clean arm64 musl injector
