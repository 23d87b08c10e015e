# squashfs-mount — see README.md. `make demo` and `make test` work on a fresh
# Debian machine as root: they install what they need first (scripts/deps).
PREFIX ?= /usr/local
DESTDIR ?=
CARGO ?= cargo
CARGO_FLAGS ?= --release --locked
# The SPANK plugin is built with its own profile (panic = "unwind": a panic
# must never abort slurmstepd; see Cargo.toml) into target/spank.
SPANK_FLAGS ?= --profile spank --locked -p spank-squashfs-mount
# SPANK=no: build and install without the Slurm plugin (no Slurm headers,
# libslurm-dev, needed).
SPANK ?= yes
# The programs make install and make demo install, built the same way by
# both (make install after make demo builds only the plugin).
PROGRAMS_FLAGS := -p squashfs-mount -p sqfs -p squashfs-mount-fuse
CARGO_TARGET_DIR ?= target
TARGET := $(CARGO_TARGET_DIR)/release
SPANK_SO := $(CARGO_TARGET_DIR)/spank/libspank_squashfs_mount.so
BINDIR := $(DESTDIR)$(PREFIX)/bin
MANDIR := $(DESTDIR)$(PREFIX)/share/man/man1
LIBDIR := $(DESTDIR)$(PREFIX)/lib/squashfs-mount
DOCDIR := $(DESTDIR)$(PREFIX)/share/doc/squashfs-mount
# The documents the packages ship (/usr/share/doc/squashfs-mount/), which the
# configuration file and the man pages name.
DOCS := README.md BENCHMARKS.md doc/user-guide.md doc/admin-guide.md doc/policy.md \
  doc/cache.md doc/fuse.md doc/threat-model.md doc/slurm.md

# Packages (see packaging/README.md). The version is the workspace's.
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n 1)
DIST := squashfs-mount-$(VERSION)
DIST_TARBALL := build/dist/$(DIST).tar.gz

# The system layout the packages install (make install-system, called by
# debian/rules and packaging/rpm/squashfs-mount.spec after building; it
# builds nothing). Each directory can be overridden for a distribution.
SYS_PREFIX ?= /usr
SYS_BINDIR ?= $(SYS_PREFIX)/bin
SYS_MANDIR ?= $(SYS_PREFIX)/share/man
SYS_PKGLIBDIR ?= $(SYS_PREFIX)/lib/squashfs-mount
SYSCONFDIR ?= /etc
UNITDIR ?= $(SYS_PREFIX)/lib/systemd/system
TMPFILESDIR ?= $(SYS_PREFIX)/lib/tmpfiles.d
BASHCOMPDIR ?= $(SYS_PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(SYS_PREFIX)/share/zsh/vendor-completions
FISHCOMPDIR ?= $(SYS_PREFIX)/share/fish/vendor_completions.d
# Programs on PATH, as name:mode (squashfs-mount is setuid root).
SYS_PROGRAMS := squashfs-mount:4755 sqfs:0755
# Helper programs in $(SYS_PKGLIBDIR) (not on PATH), e.g. squashfs-mount-fuse:0755.
SYS_HELPERS := squashfs-mount-fuse:0755 squashfs-mount-layer:0755
SYSTEMD_UNITS := squashfs-mount-gc.service squashfs-mount-gc.timer

.PHONY: all build install install-completions install-site uninstall deps demo test unit-test integration-test bench bench-slurm bench-dataset bench-dataset-full fuzz-build clean \
	install-system dist deb rpm package-test

all: build

build:
	@CARGO='$(CARGO)' scripts/deps $(if $(filter no,$(SPANK)),programs,build)
	@echo "make: building the programs (about 5 min on 2 cores from a clean tree; seconds when up to date)"
	$(CARGO) build $(CARGO_FLAGS) $(PROGRAMS_FLAGS)
ifneq ($(SPANK),no)
	@echo "make: building the Slurm plugin, with a profile of its own (about 2 min more from a clean tree; SPANK=no skips it)"
	$(CARGO) build $(SPANK_FLAGS)
endif

install: build
	install -d $(BINDIR) $(MANDIR) $(LIBDIR) $(DOCDIR)
	install -o root -g root -m 4755 $(TARGET)/squashfs-mount $(BINDIR)/squashfs-mount
	install -m 0755 $(TARGET)/sqfs $(BINDIR)/sqfs
	install -m 0644 doc/squashfs-mount.1 $(MANDIR)/squashfs-mount.1
	install -m 0644 doc/sqfs.1 $(MANDIR)/sqfs.1
ifneq ($(SPANK),no)
	install -m 0755 $(SPANK_SO) $(LIBDIR)/spank_squashfs_mount.so
endif
	install -m 0755 $(TARGET)/squashfs-mount-fuse $(LIBDIR)/squashfs-mount-fuse
	install -m 0755 $(TARGET)/squashfs-mount-layer $(LIBDIR)/squashfs-mount-layer
	install -m 0644 $(DOCS) $(DOCDIR)/
	$(MAKE) --no-print-directory install-completions

# What make install leaves out, for the programs under PREFIX (as root):
# the documented configuration file (never over an existing one), the
# tmpfiles entry of /run/squashfs-mount, and the units of the timer that
# runs `squashfs-mount --gc --expired`, which it enables (without DESTDIR,
# where systemd runs). Builds nothing.
SITE_UNITDIR := $(DESTDIR)/etc/systemd/system
install-site:
	install -d $(DESTDIR)$(SYSCONFDIR) $(DESTDIR)/etc/tmpfiles.d $(SITE_UNITDIR)
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/squashfs-mount.conf ]; then \
	  echo "make install-site: $(DESTDIR)$(SYSCONFDIR)/squashfs-mount.conf exists: kept (the documented one: etc/squashfs-mount.conf)"; \
	else install -m 0644 etc/squashfs-mount.conf $(DESTDIR)$(SYSCONFDIR)/squashfs-mount.conf; fi
	install -m 0644 packaging/tmpfiles.d/squashfs-mount.conf $(DESTDIR)/etc/tmpfiles.d/squashfs-mount.conf
	sed 's|^ExecStart=/usr/bin/squashfs-mount |ExecStart=$(PREFIX)/bin/squashfs-mount |' \
	  packaging/systemd/squashfs-mount-gc.service > $(SITE_UNITDIR)/squashfs-mount-gc.service
	install -m 0644 packaging/systemd/squashfs-mount-gc.timer $(SITE_UNITDIR)/squashfs-mount-gc.timer
	chmod 0644 $(SITE_UNITDIR)/squashfs-mount-gc.service
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
	  systemd-tmpfiles --create squashfs-mount.conf; \
	  systemctl daemon-reload && systemctl enable --now squashfs-mount-gc.timer; \
	else echo "make install-site: enable the timer with: systemctl enable --now squashfs-mount-gc.timer"; fi

# Shell completions for both programs, under PREFIX (where bash-completion,
# zsh and fish look for local additions), from what is built (no build).
PREFIX_BASHCOMPDIR := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
PREFIX_ZSHCOMPDIR := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
PREFIX_FISHCOMPDIR := $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
install-completions:
	install -d $(PREFIX_BASHCOMPDIR) $(PREFIX_ZSHCOMPDIR) $(PREFIX_FISHCOMPDIR)
	install -m 0644 packaging/completions/squashfs-mount.bash $(PREFIX_BASHCOMPDIR)/squashfs-mount
	install -m 0644 packaging/completions/_squashfs-mount $(PREFIX_ZSHCOMPDIR)/_squashfs-mount
	install -m 0644 packaging/completions/squashfs-mount.fish $(PREFIX_FISHCOMPDIR)/squashfs-mount.fish
	$(TARGET)/sqfs completions bash > $(PREFIX_BASHCOMPDIR)/sqfs
	$(TARGET)/sqfs completions zsh > $(PREFIX_ZSHCOMPDIR)/_sqfs
	$(TARGET)/sqfs completions fish > $(PREFIX_FISHCOMPDIR)/sqfs.fish
	chmod 0644 $(PREFIX_BASHCOMPDIR)/sqfs $(PREFIX_ZSHCOMPDIR)/_sqfs $(PREFIX_FISHCOMPDIR)/sqfs.fish

# Everything the packages contain, under DESTDIR, without building and
# without setting owners (the package does: root). Modes as installed.
install-system:
	@test -n "$(DESTDIR)" || { echo "install-system: set DESTDIR (it installs into /usr and /etc)" >&2; exit 1; }
	install -d $(DESTDIR)$(SYS_BINDIR) $(DESTDIR)$(SYS_MANDIR)/man1 $(DESTDIR)$(SYS_PKGLIBDIR) \
	  $(DESTDIR)$(SYSCONFDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(TMPFILESDIR) \
	  $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	for p in $(SYS_PROGRAMS); do install -m $${p#*:} $(TARGET)/$${p%%:*} $(DESTDIR)$(SYS_BINDIR)/$${p%%:*} || exit 1; done
	for p in $(SYS_HELPERS); do install -m $${p#*:} $(TARGET)/$${p%%:*} $(DESTDIR)$(SYS_PKGLIBDIR)/$${p%%:*} || exit 1; done
	install -m 0644 doc/squashfs-mount.1 doc/sqfs.1 $(DESTDIR)$(SYS_MANDIR)/man1/
	install -m 0644 $(SPANK_SO) $(DESTDIR)$(SYS_PKGLIBDIR)/spank_squashfs_mount.so
	install -m 0644 etc/squashfs-mount.conf $(DESTDIR)$(SYSCONFDIR)/squashfs-mount.conf
	for u in $(SYSTEMD_UNITS); do install -m 0644 packaging/systemd/$$u $(DESTDIR)$(UNITDIR)/$$u || exit 1; done
	install -m 0644 packaging/tmpfiles.d/squashfs-mount.conf $(DESTDIR)$(TMPFILESDIR)/squashfs-mount.conf
	install -m 0644 packaging/completions/squashfs-mount.bash $(DESTDIR)$(BASHCOMPDIR)/squashfs-mount
	install -m 0644 packaging/completions/_squashfs-mount $(DESTDIR)$(ZSHCOMPDIR)/_squashfs-mount
	install -m 0644 packaging/completions/squashfs-mount.fish $(DESTDIR)$(FISHCOMPDIR)/squashfs-mount.fish
	$(TARGET)/sqfs completions bash > $(DESTDIR)$(BASHCOMPDIR)/sqfs
	$(TARGET)/sqfs completions zsh > $(DESTDIR)$(ZSHCOMPDIR)/_sqfs
	$(TARGET)/sqfs completions fish > $(DESTDIR)$(FISHCOMPDIR)/sqfs.fish
	chmod 0644 $(DESTDIR)$(BASHCOMPDIR)/sqfs $(DESTDIR)$(ZSHCOMPDIR)/_sqfs $(DESTDIR)$(FISHCOMPDIR)/sqfs.fish

# Source tarball with every crate vendored (vendor/, .cargo/config.toml):
# builds with no network. Files tracked by git (as in the work tree),
# without debian/ (the Debian source package adds it); reproducible. Next
# to it, build/dist/spack/ and build/dist/spack-mirror/: a Spack repository
# whose recipe has this tarball's version (<version>-g<commit>) and sha256,
# and a source mirror holding it (packaging/spack/README.md).
dist:
	packaging/dist $(DIST_TARBALL)

# Debian packages (dpkg-buildpackage, debhelper) into build/deb/, checked
# with lintian. DEB_VERSION_SUFFIX=<n> builds revision <n> (upgrade tests).
deb: dist
	@CARGO='$(CARGO)' scripts/deps deb
	packaging/build-deb $(DIST_TARBALL)

# RPM packages (rpmbuild, from the dist tarball) into build/rpm/.
rpm: dist
	@CARGO='$(CARGO)' scripts/deps rpm
	packaging/build-rpm $(DIST_TARBALL)

# The package tests alone (make test runs them too): build, install into a
# debootstrap tree, upgrade, purge; RPM metadata. Root; skips loudly otherwise.
package-test:
	@CARGO='$(CARGO)' scripts/deps package-test
	packaging/test-packages

uninstall:
	rm -f $(BINDIR)/squashfs-mount $(BINDIR)/sqfs $(MANDIR)/squashfs-mount.1 $(MANDIR)/sqfs.1 \
	  $(LIBDIR)/spank_squashfs_mount.so $(LIBDIR)/squashfs-mount-fuse $(LIBDIR)/squashfs-mount-layer \
	  $(PREFIX_BASHCOMPDIR)/squashfs-mount $(PREFIX_BASHCOMPDIR)/sqfs $(PREFIX_ZSHCOMPDIR)/_squashfs-mount \
	  $(PREFIX_ZSHCOMPDIR)/_sqfs $(PREFIX_FISHCOMPDIR)/squashfs-mount.fish $(PREFIX_FISHCOMPDIR)/sqfs.fish
	rm -rf $(DOCDIR)
	@if [ -e $(SITE_UNITDIR)/squashfs-mount-gc.timer ]; then \
	  if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl disable --now squashfs-mount-gc.timer || true; fi; \
	  rm -f $(SITE_UNITDIR)/squashfs-mount-gc.service $(SITE_UNITDIR)/squashfs-mount-gc.timer $(DESTDIR)/etc/tmpfiles.d/squashfs-mount.conf; \
	  echo "make uninstall: removed the timer and the tmpfiles entry of make install-site; $(DESTDIR)$(SYSCONFDIR)/squashfs-mount.conf stays"; \
	fi

deps:
	CARGO='$(CARGO)' scripts/deps all

# The demo needs no Slurm headers: it builds the programs, not the plugin.
demo:
	@CARGO='$(CARGO)' scripts/deps demo
	@echo "make: building the programs (about 5 min on 2 cores from a clean tree; seconds when up to date)"
	$(CARGO) build $(CARGO_FLAGS) $(PROGRAMS_FLAGS)
	scripts/demo

# The builds (the plugin beside the programs and the test programs, one
# cargo run), unit tests, then the integration suite against an installed
# setuid binary run as an unprivileged test user (needs root; skips loudly
# otherwise), the package tests and the check that no setuid file is left
# reachable (scripts/test: every test program runs even when one fails, the
# package builds beside the builds and the cargo tests; where the time went
# and a summary line with the totals and the time it all took at the end).
# (MAKE_TEST_START: the duration scripts/test prints counts scripts/deps too.)
test: export MAKE_TEST_START := $(shell date +%s)
test:
	@CARGO='$(CARGO)' scripts/deps test
	CARGO='$(CARGO)' CARGO_FLAGS='$(CARGO_FLAGS)' SPANK_FLAGS='$(SPANK_FLAGS)' scripts/test

bench:
	@CARGO='$(CARGO)' scripts/deps bench
	$(CARGO) build $(CARGO_FLAGS) --workspace
	bench/run
	bench/launch-pairs
	bench/fuse-rows
	bench/cold
	bench/kept-layer
	bench/starved-holder
	bench/slurm-cluster

# The plugin's cost on the multi-node Slurm test cluster (doc/slurm.md).
bench-slurm:
	bench/slurm-cluster

# The study's dataset table on a GlusterFS volume (issue 30): as root;
# installs GlusterFS and squashfuse when missing, cleans up at exit.
bench-dataset:
	$(CARGO) build $(CARGO_FLAGS) --workspace
	bench/dataset

# The study's collection through one launch (issues 30, 36): by default its
# 1/14 (parts 1-4, 1,189,724 entries; about 10 minutes with the parts
# built), kernel path, FUSE path and squashfuse_ll, find and stat scans,
# cold and warm; BENCH_SCALE=full: all 56 images, 16,656,087 entries (built
# once, kept in /var/tmp/squashfs-mount-dataset-full). See the script.
bench-dataset-full:
	$(CARGO) build $(CARGO_FLAGS) --workspace
	bench/dataset-full

fuzz-build:
	cd fuzz && $(CARGO) fuzz build

clean:
	$(CARGO) clean
	rm -rf build/dist build/deb build/deb-upgrade build/rpm build/test-logs build/cargo-target-deb build/cargo-target-deb-upgrade build/cargo-target-rpm
