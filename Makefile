# libmasteraff
PREFIX ?= /usr/local
DEB_HOST_MULTIARCH ?= $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
LIBDIR ?= $(PREFIX)/lib/$(DEB_HOST_MULTIARCH)
DESTDIR ?=

CC ?= cc
CFLAGS ?= -O2 -g
WARN = -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes
LIB_CFLAGS = $(WARN) -fPIC -fvisibility=hidden -D_FORTIFY_SOURCE=2 $(CFLAGS)
LDLIBS = -ldl -pthread

LIB = libmasteraff.so
LIB_SRC = shim.c config.c memory.c affinity.c
LIB_HDR = affinity.h internal.h

UNIT_TESTS = test/t_cpulist test/t_topology test/t_brood
TEST_CFLAGS = $(WARN) -g -O1 -DSRCDIR=\"$(CURDIR)\" -I.

all: $(LIB)

$(LIB): $(LIB_SRC) $(LIB_HDR)
	$(CC) $(LIB_CFLAGS) -shared -Wl,-z,defs -o $@ $(LIB_SRC) $(LDLIBS)

test/t_%: test/t_%.c affinity.c affinity.h test/tap.h
	$(CC) $(TEST_CFLAGS) -o $@ $< affinity.c

# The unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer.
test/asan_%: test/t_%.c affinity.c affinity.h test/tap.h
	$(CC) $(TEST_CFLAGS) -fsanitize=address,undefined -fno-sanitize-recover=all -o $@ $< affinity.c

# What the tests need on Debian 12 (CI runs this as root).
TEST_DEPS = build-essential clang nginx-light curl procps psmisc numactl \
	libnuma1 valgrind qemu-system-x86 busybox-static cpio

deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(TEST_DEPS)

# Unit tests natively and under sanitizers, then the shell tests that drive
# a real nginx (and, with qemu, real kernels with emulated topologies).
check: $(LIB) $(UNIT_TESTS) $(UNIT_TESTS:test/t_%=test/asan_%)
	prove -v -e '' $(UNIT_TESTS) $(UNIT_TESTS:test/t_%=test/asan_%) test/*.t

install: $(LIB)
	install -d $(DESTDIR)$(LIBDIR)
	install -m 0644 $(LIB) $(DESTDIR)$(LIBDIR)/$(LIB)

clean:
	rm -f $(LIB) test/t_cpulist test/t_topology test/t_brood test/asan_*

.PHONY: all deps check install clean

demo:
	scripts/demo

.PHONY: demo
