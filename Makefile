# Veneer: `make run` serves the development environment, `make test` runs every test.
# Both install what the build needs first (libyaml-dev through apt) when it is missing.

SWIFT   ?= swift
PREFIX  ?= /usr/local
DESTDIR ?=
ARGS    ?=
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PATH := $(PATH):/opt/swift/usr/bin

BINDIR     ?= $(PREFIX)/bin
UNITDIR    ?= $(PREFIX)/lib/systemd/system
DOCDIR     ?= $(PREFIX)/share/doc/veneer
SYSCONFDIR ?= /etc

.PHONY: all deps test-deps build release run test test-units test-layers check bench install uninstall clean

all: build

# libyaml (pkg-config yaml-0.1) is the one system library Veneer links.
deps:
	@if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists yaml-0.1; then \
		echo "make: installing libyaml-dev and pkg-config"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libyaml-dev pkg-config; \
	fi

# The tests of the postgres store start a real PostgreSQL server of their own (initdb in /tmp).
test-deps: deps
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "make: installing postgresql for the tests"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
	fi

build: deps
	$(SWIFT) build

# The release binary: cross-module optimization (generic code of SwiftNIO and the HTTP types
# specialized for Veneer's use), and runtime exclusivity checks off: the compiler still
# enforces exclusivity statically and every test runs the checked debug build; the checks
# cost about an eighth of the CPU of a proxied request (README, Benchmarks).
RELEASE_FLAGS ?= -Xswiftc -cross-module-optimization -Xswiftc -enforce-exclusivity=unchecked

release: deps
	$(SWIFT) build -c release --product veneer $(RELEASE_FLAGS)

# Serve the development environment of config/veneer.yaml on 127.0.0.1:8080 (ARGS="-e staging" etc.).
run: release
	.build/release/veneer run $(ARGS)

# Debug build only: CI builds from a fresh clone every time.
# One test at a time (about 65 s of testing; 23 s in parallel): the tests run real servers,
# processes and PostgreSQL with deadlines of a few seconds, and on two busy cores a parallel
# run missed one of them in about one run of three (different tests each time). `swift test`
# still runs them in parallel.
test: test-deps test-units test-layers
	$(SWIFT) build --build-tests
	$(SWIFT) test --no-parallel

# Each module imports only the layers below it; the decorators never see the HTTP/1.1 wire.
test-layers:
	Tests/layers/check-layers.sh

# systemd-analyze verify + security (exposure <= 2.0) on systemd/*.service; skipped without systemd-analyze.
test-units:
	Tests/systemd/check-units.sh

# Installs the release binary, the units, the README and an example configuration
# (never over an existing /etc/veneer/veneer.yaml). PREFIX and DESTDIR as usual.
install: release
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(SYSCONFDIR)/veneer
	install -m 0755 .build/release/veneer $(DESTDIR)$(BINDIR)/veneer
	sed 's|/usr/local/bin/veneer|$(BINDIR)/veneer|; s|/usr/local/share/doc/veneer|$(DOCDIR)|' systemd/veneer@.service > $(DESTDIR)$(UNITDIR)/veneer@.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/veneer@.service
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -m 0644 config/veneer.yaml $(DESTDIR)$(SYSCONFDIR)/veneer/veneer.yaml.example
	@if [ ! -e $(DESTDIR)$(SYSCONFDIR)/veneer/veneer.yaml ]; then \
		install -m 0644 config/veneer.yaml $(DESTDIR)$(SYSCONFDIR)/veneer/veneer.yaml; \
		echo "installed $(DESTDIR)$(SYSCONFDIR)/veneer/veneer.yaml (edit it, then: systemctl daemon-reload && systemctl start veneer@production)"; \
	fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/veneer $(DESTDIR)$(UNITDIR)/veneer@.service $(DESTDIR)$(SYSCONFDIR)/veneer/veneer.yaml.example
	rm -rf $(DESTDIR)$(DOCDIR)

check: build
	.build/debug/veneer check --all

# Side-by-side benchmark against nginx, Varnish and HAProxy (see bench/README.md).
bench: release
	bench/run.sh

clean:
	rm -rf .build
