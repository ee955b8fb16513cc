# Veneer: `make run` serves the development environment, `make test` runs every test.
# Both install what the build needs first (libyaml-dev through apt) when it is missing.

SWIFT   ?= swift
PREFIX  ?= /usr/local
DESTDIR ?=
ARGS    ?=
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PATH := $(PATH):/opt/swift/usr/bin

BINDIR      ?= $(PREFIX)/bin
UNITDIR     ?= $(PREFIX)/lib/systemd/system
DOCDIR      ?= $(PREFIX)/share/doc/veneer
DATADIR     ?= $(PREFIX)/share/veneer
MANDIR      ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
SYSCONFDIR  ?= /etc
# Where gdb looks for detached debug symbols by build id, whatever the PREFIX.
DEBUGDIR    ?= /usr/lib/debug

# What `make dist` makes (the shipped binary and what is generated from it), and `make deb`.
DIST   := .build/dist
DEBDIR := .build/deb

.PHONY: test-bench all deps test-deps package-deps build release symbol-order dist run test test-units test-layers test-example test-example-package test-package check bench install install-files uninstall deb clean fuzz fuzz-build fuzz-merge

all: build

# libyaml (pkg-config yaml-0.1) and zlib (record reads compressed bodies) are the system
# libraries Veneer links.
deps:
	@if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists yaml-0.1 zlib; then \
		echo "make: installing libyaml-dev, zlib1g-dev and pkg-config"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libyaml-dev zlib1g-dev pkg-config; \
	fi

# $(call apt-need,COMMAND:PACKAGE ...) installs through apt the packages whose command is missing.
apt-need = missing=""; for need in $(1); do \
		command -v "$${need%%:*}" >/dev/null 2>&1 || missing="$$missing $$(echo $$need | cut -d: -f2)"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make: installing$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# The tests of the postgres store start a real PostgreSQL server of their own (initdb in /tmp);
# promtool (Debian package prometheus) checks the /-/metrics exposition of a live instance;
# chromium (headless) loads the status page from a live instance.
test-deps: deps
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "make: installing postgresql for the tests"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
	fi
	@$(call apt-need,promtool:prometheus chromium:chromium)
	@# The telemetry tests decode what Veneer sends with OpenTelemetry's own protobuf
	@# definitions (PyPI opentelemetry-proto), in a virtual environment of their own.
	@if ! .build/otlp-venv/bin/python -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null; then \
		echo "make: installing opentelemetry-proto into .build/otlp-venv"; \
		python3 -m venv .build/otlp-venv 2>/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv && python3 -m venv .build/otlp-venv; }; \
		.build/otlp-venv/bin/pip install -q opentelemetry-proto; \
	fi

build: deps
	$(SWIFT) build

# The release binary: cross-module optimization (generic code of SwiftNIO and the HTTP types
# specialized for Veneer's use), and runtime exclusivity checks off: the compiler still
# enforces exclusivity statically and every test runs the checked debug build; the checks
# cost about an eighth of the CPU of a proxied request (README, Benchmarks). Each function in
# a section of its own (Swift's -function-sections, and the C targets'), so that the linker
# can drop what nothing calls and lay out the rest in the order of packaging/veneer.order.
RELEASE_FLAGS ?= -Xswiftc -cross-module-optimization -Xswiftc -enforce-exclusivity=unchecked \
	-Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections -Xcc -fdata-sections
# The Swift runtime and Foundation linked in, and no RUNPATH ($$ORIGIN or the toolchain's):
# the binary runs on a machine without Swift, needing only libc, libstdc++, libyaml and zlib.
# `-z now` resolves the few dynamic symbols at start, so the whole GOT is read-only (full RELRO).
# `--no-export-dynamic` undoes the toolchain's static-stdlib-args.lnk export of every symbol
# of the package's modules (55,000, 2.2 MB of .dynsym, .gnu.hash and .dynstr that the dynamic
# linker reads at start, resident in every process): nothing looks them up.
# Linked by lld (the toolchain's own, next to swiftc) rather than gold, for what gold cannot do:
# RELR relocations (`-z pack-relative-relocs`: the 141,000 relative relocations in 48 KB
# instead of 3.3 MB of .rela.dyn read at every start), and the symbol ordering file: the
# functions that start-up and serving run (packaging/veneer.order, `make symbol-order`) laid
# side by side at the start of .text, so that an idle process holds a few MB of code pages
# instead of pages spread over the 33 MB (README, "Installing"). A symbol of the file that no
# longer exists is skipped (--no-warn-symbol-ordering): a stale file costs memory, never
# correctness. The code sections that have no symbol to name in that file (closure-context
# destructors and other private helpers, 7,000 small ones) are gathered before .text by
# packaging/veneer-text.ld rather than left spread over it.
SYMBOL_ORDER := packaging/veneer.order
TEXT_SCRIPT := packaging/veneer-text.ld
RELEASE_LINK_FLAGS ?= --static-swift-stdlib --disable-local-rpath -Xswiftc -use-ld=lld \
	-Xlinker -z -Xlinker now -Xlinker --no-export-dynamic -Xlinker -z -Xlinker pack-relative-relocs \
	-Xlinker --symbol-ordering-file=$(CURDIR)/$(SYMBOL_ORDER) -Xlinker --no-warn-symbol-ordering \
	-Xlinker -T -Xlinker $(CURDIR)/$(TEXT_SCRIPT)

# SwiftPM does not know the ordering file or the script: a binary older than either is linked again.
release: deps
	@if [ .build/release/veneer -ot $(SYMBOL_ORDER) ] || [ .build/release/veneer -ot $(TEXT_SCRIPT) ]; then rm -f .build/release/veneer; fi
	$(SWIFT) build -c release --product veneer $(RELEASE_LINK_FLAGS) $(RELEASE_FLAGS)

# Regenerates $(SYMBOL_ORDER) from the release binary run under valgrind's callgrind
# (packaging/symbol-order.py: start, hits, misses, admin requests, on a cache chain then on the
# production chain), then links again with it.
symbol-order: release
	@$(call apt-need,valgrind:valgrind objcopy:binutils)
	objcopy --strip-debug .build/release/veneer .build/veneer-symbols
	packaging/symbol-order.py .build/veneer-symbols > $(SYMBOL_ORDER).new
	mv $(SYMBOL_ORDER).new $(SYMBOL_ORDER)
	rm -f .build/veneer-symbols
	@$(MAKE) --no-print-directory release

# The shipped binary in $(DIST): the release build stripped, its debug symbols in veneer.debug
# (named in the binary by build id and by debuglink), and what the binary generates about
# itself: the manual page (swift-argument-parser's generate-manual, dated by the latest entry of
# packaging/debian/changelog so that a rebuild gives the same page; built as a root package, the
# dependency's deprecation warnings would show) and shell completions.
dist: release
	@$(call apt-need,objcopy:binutils)
	rm -rf $(DIST)
	install -d $(DIST)/completions
	objcopy --only-keep-debug --compress-debug-sections .build/release/veneer $(DIST)/veneer.debug
	chmod 0644 $(DIST)/veneer.debug
	objcopy --strip-all --remove-section=.comment .build/release/veneer $(DIST)/veneer
	cd $(DIST) && objcopy --add-gnu-debuglink=veneer.debug veneer
	$(SWIFT) build -c release --package-path .build/checkouts/swift-argument-parser \
		--scratch-path .build/tools/argument-parser --product generate-manual -Xswiftc -suppress-warnings
	.build/tools/argument-parser/release/generate-manual $(DIST)/veneer --output-directory $(DIST) \
		--date "$$(date -u -d "$$(sed -n 's/^ -- .*>  //p' packaging/debian/changelog | head -n 1)" +%F)"
	$(DIST)/veneer --generate-completion-script bash | sed '1{/^#!/d}' > $(DIST)/completions/veneer.bash
	$(DIST)/veneer --generate-completion-script zsh > $(DIST)/completions/_veneer
	$(DIST)/veneer --generate-completion-script fish > $(DIST)/completions/veneer.fish

# Serve the development environment of config/veneer.yaml on 127.0.0.1:8080 (ARGS="-e staging" etc.).
run: release
	.build/release/veneer run $(ARGS)

# Debug build only: CI builds from a fresh clone every time.
# The tests run side by side, at most TEST_WIDTH at a time (four per core; Swift Testing's
# SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH): they start real servers, processes,
# PostgreSQL and chromium, and all of them at once (what a bare `swift test` does) keep two
# cores so busy that the servers' own short timeouts fire in the middle of other tests. Tests
# wait for conditions (`eventually`) rather than for fixed times, so a slow machine costs
# time, not failures. About a minute of testing on two busy cores (four, one at a time).
TEST_WIDTH ?= $(shell echo $$(( $$(nproc) * 4 )))
test: test-deps test-units test-layers
	$(SWIFT) build --build-tests
	@$(MAKE) --no-print-directory test-example
	@$(MAKE) --no-print-directory test-bench
	SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH) $(SWIFT) test --skip-build

# The example decorators (Examples/*: packages of their own) are built and tested above as
# targets of this package; this type-checks their sources as an outside package sees Veneer
# (the modules just built, without Veneer's package name): public API only. Seconds.
test-example:
	SWIFT="$(SWIFT)" Tests/examples/check-public-api.sh

# The configurations of the scaling benchmarks (conns, cores, sizes, chain, entries) pass
# `veneer check` (the debug build) and `nginx -t` (where nginx is installed); nothing is started.
test-bench:
	VENEER_BIN=.build/debug/veneer bench/run.sh --scenarios conns,cores,sizes,chain,entries --dry-run

# Each example built and tested as the package of its own it is: Veneer's dependency graph
# once more in its own .build (about 7 minutes on 2 cores). CI runs it after `make test`.
test-example-package: deps
	@for example in Examples/*/; do \
		echo "make: building $$example as a package of its own"; \
		(cd "$$example" && $(SWIFT) build --build-tests && $(SWIFT) test --skip-build) || exit 1; \
	done

# Each module imports only the layers below it; the decorators never see the HTTP/1.1 wire;
# the runtime and the command line name no decorator; every module declares what it imports.
test-layers:
	Tests/layers/check-layers.sh
	Tests/layers/check-boundary.sh

# systemd-analyze verify + security (exposure <= 2.0) on systemd/*.service; skipped without systemd-analyze.
test-units:
	Tests/systemd/check-units.sh

# Installs what `make dist` made: the stripped binary, its debug symbols under
# $(DEBUGDIR)/.build-id/, the unit (paths rewritten to BINDIR and DOCDIR), the manual page,
# the completions, the README and LICENSE, the sample posts of the development environment and the example
# configuration (in DOCDIR/examples, and as SYSCONFDIR/veneer/veneer.yaml unless that exists).
# PREFIX and DESTDIR as usual.
install: dist
	@$(MAKE) --no-print-directory install-files

# The installed configuration's development environment reads its sample posts from DATADIR
# (config/veneer.yaml names them relative to itself, fixtures/posts.json: made absolute here).
install-files:
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(SYSCONFDIR)/veneer \
		$(DESTDIR)$(DATADIR)/fixtures $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 0755 $(DIST)/veneer $(DESTDIR)$(BINDIR)/veneer
	id="$$(readelf -n $(DIST)/veneer | sed -n 's/^ *Build ID: *//p')"; \
		[ -n "$$id" ] || { echo "make: $(DIST)/veneer has no build id" >&2; exit 1; }; \
		install -D -m 0644 $(DIST)/veneer.debug "$(DESTDIR)$(DEBUGDIR)/.build-id/$$(echo $$id | cut -c1-2)/$$(echo $$id | cut -c3-).debug"
	sed 's|/usr/local/bin/veneer|$(BINDIR)/veneer|; s|/usr/local/share/doc/veneer|$(DOCDIR)|' systemd/veneer@.service > $(DESTDIR)$(UNITDIR)/veneer@.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/veneer@.service
	sed 's|/usr/local/share/doc/veneer|$(DOCDIR)|' systemd/veneer@.socket > $(DESTDIR)$(UNITDIR)/veneer@.socket
	chmod 0644 $(DESTDIR)$(UNITDIR)/veneer@.socket
	install -D -m 0644 systemd/examples/veneer@.socket.d/loopback.conf $(DESTDIR)$(DOCDIR)/examples/veneer@.socket.d/loopback.conf
	gzip -9n < $(DIST)/veneer.1 > $(DESTDIR)$(MANDIR)/man1/veneer.1.gz
	install -m 0644 $(DIST)/completions/veneer.bash $(DESTDIR)$(BASHCOMPDIR)/veneer
	install -m 0644 $(DIST)/completions/_veneer $(DESTDIR)$(ZSHCOMPDIR)/_veneer
	install -m 0644 $(DIST)/completions/veneer.fish $(DESTDIR)$(FISHCOMPDIR)/veneer.fish
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -m 0644 LICENSE $(DESTDIR)$(DOCDIR)/LICENSE
	install -m 0644 config/fixtures/posts.json $(DESTDIR)$(DATADIR)/fixtures/posts.json
	sed 's|seed: fixtures/|seed: $(DATADIR)/fixtures/|' config/veneer.yaml > $(DESTDIR)$(DOCDIR)/examples/veneer.yaml
	chmod 0644 $(DESTDIR)$(DOCDIR)/examples/veneer.yaml
	@if [ ! -e $(DESTDIR)$(SYSCONFDIR)/veneer/veneer.yaml ]; then \
		install -m 0644 $(DESTDIR)$(DOCDIR)/examples/veneer.yaml $(DESTDIR)$(SYSCONFDIR)/veneer/veneer.yaml; \
		echo "installed $(DESTDIR)$(SYSCONFDIR)/veneer/veneer.yaml (edit it, then: systemctl daemon-reload && systemctl start veneer@production)"; \
	fi

uninstall:
	id="$$(readelf -n $(DESTDIR)$(BINDIR)/veneer 2>/dev/null | sed -n 's/^ *Build ID: *//p')"; [ -z "$$id" ] || \
		rm -f "$(DESTDIR)$(DEBUGDIR)/.build-id/$$(echo $$id | cut -c1-2)/$$(echo $$id | cut -c3-).debug"
	rm -f $(DESTDIR)$(BINDIR)/veneer $(DESTDIR)$(UNITDIR)/veneer@.service $(DESTDIR)$(UNITDIR)/veneer@.socket $(DESTDIR)$(MANDIR)/man1/veneer.1.gz \
		$(DESTDIR)$(BASHCOMPDIR)/veneer $(DESTDIR)$(ZSHCOMPDIR)/_veneer $(DESTDIR)$(FISHCOMPDIR)/veneer.fish
	rm -rf $(DESTDIR)$(DOCDIR) $(DESTDIR)$(DATADIR)

# dpkg-dev (dpkg-shlibdeps), lintian and binutils (objcopy, readelf) for the package and its test.
package-deps:
	@$(call apt-need,dpkg-shlibdeps:dpkg-dev lintian:lintian objcopy:binutils readelf:binutils)

# The Debian package, with dpkg-deb (packaging/build-deb.sh): $(DEBDIR)/veneer_VERSION_ARCH.deb
# and veneer-dbgsym_VERSION_ARCH.deb (the debug symbols). Files go where Debian 12 expects them.
deb: package-deps dist
	rm -rf $(DEBDIR)
	@$(MAKE) --no-print-directory install-files DESTDIR=$(CURDIR)/$(DEBDIR)/root PREFIX=/usr \
		UNITDIR=/lib/systemd/system ZSHCOMPDIR=/usr/share/zsh/vendor-completions
	packaging/build-deb.sh $(DEBDIR)/root $(DEBDIR)

# Builds the package, unpacks it into a scratch root and runs it there without the toolchain,
# checks its contents, and runs lintian. CI runs it after `make test` (the release build).
test-package: deb
	Tests/packaging/check-package.sh $(DEBDIR)

# The release build when there is one (`make run` made it; brought up to date first), else the
# debug build: a first debug build would take minutes for a check that takes milliseconds.
check: deps
	@if [ -x .build/release/veneer ]; then \
		$(MAKE) --no-print-directory release && .build/release/veneer check --all; \
	else \
		$(SWIFT) build && .build/debug/veneer check --all; \
	fi

# Fuzzing (README, "Fuzzing"): each target of Fuzz/ built as its own libFuzzer executable with
# AddressSanitizer, in its own scratch path (VENEER_FUZZ=1 adds the executables to the
# manifest), then run for FUZZ_SECONDS each, from the corpus kept in Fuzz/Corpus. New inputs
# go to $(FUZZ_SCRATCH)/corpus, crashes to $(FUZZ_SCRATCH)/artifacts; `make fuzz-merge` adds
# to the kept corpus only the inputs that reach code it does not (libFuzzer's -merge=1).
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= request response differential config cache-headers fault-header quantities
FUZZ_SCRATCH ?= .build-fuzz
# -Xswiftc repeats the sanitizers for the Swift modules: measured here, a first build after
# a resolve in a fresh scratch path compiled them without coverage from --sanitize alone.
FUZZ_BUILD = VENEER_FUZZ=1 $(SWIFT) build --scratch-path $(FUZZ_SCRATCH) --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer,address
# The Swift backtracer's own crash handler trips AddressSanitizer: libFuzzer reports instead.
FUZZ_RUN = SWIFT_BACKTRACE=enable=no $(FUZZ_SCRATCH)/debug/fuzz-$$target

fuzz-build: deps
	VENEER_FUZZ=1 $(SWIFT) package --scratch-path $(FUZZ_SCRATCH) resolve
	@for target in $(FUZZ_TARGETS); do $(FUZZ_BUILD) --product fuzz-$$target || exit 1; done

fuzz: fuzz-build
	@mkdir -p $(FUZZ_SCRATCH)/artifacts
	@for target in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_SCRATCH)/corpus/$$target; \
		case $$target in config|cache-headers|fault-header|quantities) dict=$$target ;; *) dict=http ;; esac; \
		echo "make: fuzz-$$target for $(FUZZ_SECONDS) s"; \
		$(FUZZ_RUN) $(FUZZ_SCRATCH)/corpus/$$target Fuzz/Corpus/$$target -dict=Fuzz/dict/$$dict.dict \
			-max_total_time=$(FUZZ_SECONDS) -timeout=10 -print_final_stats=1 -artifact_prefix=$(FUZZ_SCRATCH)/artifacts/$$target- || exit 1; \
	done

fuzz-merge:
	@for target in $(FUZZ_TARGETS); do $(FUZZ_RUN) -merge=1 Fuzz/Corpus/$$target $(FUZZ_SCRATCH)/corpus/$$target || exit 1; done

# Side-by-side benchmark against nginx, Varnish and HAProxy (see bench/README.md).
bench: release
	bench/run.sh

clean:
	rm -rf .build $(FUZZ_SCRATCH)
