# Conventional entry points; the work is done by cargo and scripts/install.
#   make                                   build the release binaries
#   sudo make install [PREFIX=/usr/local] [DESTDIR=]
#   sudo make uninstall [PREFIX=/usr/local] [DESTDIR=]
#   make check                             the test suite
#   make generated                         rewrite every generated file: the man pages'
#                                          option lists and contrib/completions/ (flag
#                                          tables), gpupeek(1)'s field lists (field table),
#                                          the C and Python readers' layout tables
PREFIX ?= /usr/local
DESTDIR ?=
CARGO ?= cargo

.PHONY: all install uninstall check generated

all:
	$(CARGO) build --release -p gpupeekd -p gpupeek -p gpupeek-serve -p gpupeek-top -p gpupeek-plot -p gpupeek-fleet

install:
	PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" scripts/install

uninstall:
	PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" scripts/install --uninstall

check:
	$(CARGO) test --workspace

generated:
	GPUPEEK_WRITE_GENERATED=1 $(CARGO) test -p gpupeek -p gpupeekd generated
	$(CARGO) run -q -p gpupeek-model --example gen-man -- --write
	$(CARGO) run -q -p gpupeek-shm --example gen-readers -- --write
