# squashfs-mount — see README.md. `make demo` and `make test` work on a fresh
# Debian machine as root: they install what they need first (scripts/deps).
PREFIX ?= /usr/local
DESTDIR ?=
CARGO ?= cargo
CARGO_FLAGS ?= --release --locked
# The SPANK plugin is built with its own profile (panic = "unwind": a panic
# must never abort slurmstepd; see Cargo.toml) into target/spank.
SPANK_FLAGS ?= --profile spank --locked -p spank-squashfs-mount
TARGET := target/release
SPANK_SO := target/spank/libspank_squashfs_mount.so
BINDIR := $(DESTDIR)$(PREFIX)/bin
MANDIR := $(DESTDIR)$(PREFIX)/share/man/man1
LIBDIR := $(DESTDIR)$(PREFIX)/lib/squashfs-mount

.PHONY: all build install uninstall deps demo test unit-test integration-test bench bench-slurm fuzz-build clean

all: build

build:
	@scripts/deps build
	$(CARGO) build $(CARGO_FLAGS) --workspace
	$(CARGO) build $(SPANK_FLAGS)

install: build
	install -d $(BINDIR) $(MANDIR) $(LIBDIR)
	install -o root -g root -m 4755 $(TARGET)/squashfs-mount $(BINDIR)/squashfs-mount
	install -m 0755 $(TARGET)/sqfs $(BINDIR)/sqfs
	install -m 0644 doc/squashfs-mount.1 $(MANDIR)/squashfs-mount.1
	install -m 0644 doc/sqfs.1 $(MANDIR)/sqfs.1
	install -m 0755 $(SPANK_SO) $(LIBDIR)/spank_squashfs_mount.so
	install -m 0755 $(TARGET)/squashfs-mount-fuse $(LIBDIR)/squashfs-mount-fuse

uninstall:
	rm -f $(BINDIR)/squashfs-mount $(BINDIR)/sqfs $(MANDIR)/squashfs-mount.1 $(MANDIR)/sqfs.1 \
	  $(LIBDIR)/spank_squashfs_mount.so $(LIBDIR)/squashfs-mount-fuse

deps:
	scripts/deps all

demo:
	@scripts/deps demo
	$(CARGO) build $(CARGO_FLAGS) --workspace
	scripts/demo

# Unit tests, then the integration suite against an installed setuid binary
# run as an unprivileged test user (needs root; skips loudly otherwise).
test:
	@scripts/deps test
	$(CARGO) build $(CARGO_FLAGS) --workspace
	$(CARGO) build $(SPANK_FLAGS)
	$(CARGO) test $(CARGO_FLAGS) --workspace

bench:
	@scripts/deps bench
	$(CARGO) build $(CARGO_FLAGS) --workspace
	bench/run
	bench/slurm-cluster

# The plugin's cost on the multi-node Slurm test cluster (doc/slurm.md).
bench-slurm:
	bench/slurm-cluster

fuzz-build:
	cd fuzz && $(CARGO) fuzz build

clean:
	$(CARGO) clean
