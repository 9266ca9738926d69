# capfs — the two commands: `make demo` and `make test`. Everything they need is
# installed here when missing (Go modules through the module proxy; staticcheck).

SHELL       := /bin/bash
GO          ?= go
STATICCHECK_VERSION := v0.8.2
GOBIN       := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(GOBIN)/staticcheck
PKGS        := ./...

.PHONY: all build demo demo-scratch test cross unit sysdeps fuzz-short lint vet fmt-check staticcheck bench fuzz stress tools bazel-remote clean

# The default goal builds the command: bin/capfs. It needs no network once the
# module cache holds the dependencies, so `capfs run -- make` works in a clone.
all: build

## build: the capfs command, as bin/capfs.
build:
	$(GO) build -o bin/capfs ./cmd/capfs

## demo: the main job on embedded defaults (no config, no server): `capfs run -- make`
## on the sample project (a temporary copy): checkout, a build under bubblewrap, the
## outputs synced back through the capability, then the built program and the
## audit trail's last lines. The capability tour without a sandbox: make demo-scratch.
demo: sysdeps
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp -r examples/build/hello "$$tmp/" && $(GO) build -o "$$tmp/capfs" ./cmd/capfs && \
	cd "$$tmp/hello" && echo "\$$ capfs run -- make   (in a copy of examples/build/hello)" && \
	../capfs --audit "$$tmp/audit.jsonl" run -- make && \
	echo "\$$ ./bin/hello   (built in the sandbox, synced back)" && ./bin/hello && \
	echo "--- audit trail, last lines of $$tmp/audit.jsonl" && tail -n 5 "$$tmp/audit.jsonl"

## demo-scratch: the capability tour (compose, grant, attenuate, revoke) in memory.
demo-scratch:
	$(GO) run ./examples/scratch

## test: everything CI runs: the cross-builds, lint, race-enabled tests, short
## bounded fuzzing.
test: cross lint unit fuzz-short

# cross builds and vets the module for every target it supports: linux, darwin
# and windows on amd64 and arm64 (vet under each target's build tags checks its
# test files too). Linux-only packages (materialize and its sandbox, run,
# fuseexport, the benchmarks that use them) are empty elsewhere, and capfs's
# run, sync, cache and mount fail there with not_supported; see docs/portability.md.
# The targets go one at a time: Go already uses every core within one.
CROSS_TARGETS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

cross:
	@set -e; start=$$(date +%s); for t in $(CROSS_TARGETS); do \
		echo "cross $$t: go build, go vet"; \
		GOOS=$${t%/*} GOARCH=$${t#*/} $(HANG_BOUND) 10m $(GO) build $(PKGS); \
		GOOS=$${t%/*} GOARCH=$${t#*/} $(HANG_BOUND) 10m $(GO) vet $(PKGS); \
	done; echo "cross: $(words $(CROSS_TARGETS)) targets built and vetted in $$(( $$(date +%s) - start )) s"

# Every test binary panics with its goroutines' stacks after 8 minutes (-timeout).
# The outer bound catches what that cannot: a binary that does not exit after its
# panic (a thread stuck in the kernel), or a child process it leaves holding the
# output. A hang fails the run with output instead of running on unseen. The
# downloads and builds of the tools are bounded the same way (a stalled module
# download has no timeout of its own). --foreground keeps the command in the
# terminal's process group, so Ctrl-C still reaches it.
HANG_BOUND ?= timeout --foreground --kill-after=30s

unit: sysdeps
	$(HANG_BOUND) 20m $(GO) test -race -count=1 -timeout 8m $(PKGS)

# sysdeps installs the host tools tests use when missing: git builds the gitree
# fixtures, bubblewrap runs the sandboxed builds, cc builds the sample project (and pjdfstest, which
# names its files with openssl). Without root (or apt-get) it says which tests will skip.
SYSDEPS := git:git bwrap:bubblewrap cc:gcc fusermount3:fuse3 rg:ripgrep openssl:openssl

sysdeps:
	@missing=""; for d in $(SYSDEPS); do \
		command -v $${d%%:*} >/dev/null 2>&1 || missing="$$missing $${d##*:}"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			$(HANG_BOUND) 10m apt-get update && $(HANG_BOUND) 10m apt-get install -y $$missing; \
		else echo "missing and not installable here:$$missing (the tests that need them will skip)"; fi; \
	fi

# Short, bounded fuzz runs of every fuzz target (longer ones: make fuzz). Each is
# bounded by a count of executions (pkg:Target:count, sized to a few seconds here),
# not by a duration: Go 1.26's fuzz coordinator can report a spurious "context
# deadline exceeded" failure when a -fuzztime duration runs out under load
# (golang/go#75804, fixed in Go 1.27). A count has no deadline to race.
# The whole phase is bounded by FUZZ_TOTAL seconds of wall time, not per target:
# once the phase has used it, the remaining targets are not fuzzed (their seed
# corpora, the generated hostile cases included, already ran as tests in the
# unit phase), and the run says how many were left to make fuzz. Targets go in
# turn from a rotating start (the day of the year), so a loaded machine does not
# always leave out the same ones. On a loaded machine the phase stays near its
# bound instead of growing with the load. FUZZTIME=2m (a duration or Nx) overrides every count
# and the total. Fuzzing runs with no test timeout (the testing package stops its
# alarm before it fuzzes), so each run is bounded from outside: an input that
# hangs fails the run after FUZZ_BOUND.
FUZZTIME    ?=
FUZZ_BOUND  ?= 10m
FUZZ_TOTAL  ?= 120
FUZZ_TARGETS := \
	./vfs:FuzzParseGuest:200000 \
	./vfs:FuzzCleanWords:200000 \
	./vfs:FuzzResolve:200000 \
	./dir:FuzzGlob:60000 \
	./policy:FuzzRules:40000 \
	./policy:FuzzCompiled:40000 \
	./authority:FuzzParseSubject:100000 \
	./cmd/capfs:FuzzParseMountFlag:20000 \
	./cmd/capfs:FuzzGrepMatch:50000 \
	./mcpserver:FuzzParsePatch:100000 \
	./mcpserver:FuzzApplyPatch:30000 \
	./internal/treediff:FuzzTreeDiff:20000 \
	./backends/gitree/internal/pack:FuzzInflate:30000 \
	./internal/termsafe:FuzzEscape:200000 \
	./audit:FuzzReadJSONL:30000 \
	./audit:FuzzAppendJSON:50000 \
	./audit:FuzzReadCompact:5000 \
	./archive:FuzzSanitizeName:100000 \
	./archive:FuzzExtract:5000 \
	./archive:FuzzZipZstd:5000 \
	./backends/cas:FuzzDecodeDirectory:100000 \
	./backends/cas:FuzzParseDigest:100000 \
	./backends/cas/remote:FuzzDownloadBudget:100 \
	./backends/sqlite:FuzzAgentFSOpen:1500 \
	./backends/sqlite:FuzzScratchOpen:1500 \
	./backends/sqlite/sqlar:FuzzImport:1500 \
	./authority:FuzzParseGrantSet:30000 \
	./internal/strictjson:FuzzCheckDuplicateKeys:50000 \
	./materialize:FuzzParseGitCache:100000 \
	./policy:FuzzParseConfig:30000

fuzz-short:
	@set -e; start=$$(date +%s); left=0; n=0; \
	set -- $(FUZZ_TARGETS); k=$$(( $$(date +%j | sed 's/^0*//') % $$# )); \
	targets="$$(printf '%s\n' "$$@" | tail -n +$$((k+1))) $$(printf '%s\n' "$$@" | head -n $$k)"; \
	for t in $$targets; do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$${rest##*:}x; \
		if ! $(GO) test -list "^$$name$$" $$pkg 2>/dev/null | grep -qx "$$name"; then \
			echo "fuzz target $$name missing in $$pkg" >&2; exit 1; fi; \
		if [ -n "$(FUZZTIME)" ]; then budget="$(FUZZTIME)"; \
		elif [ $$(( $$(date +%s) - start )) -ge $(FUZZ_TOTAL) ]; then left=$$((left+1)); echo "fuzz $$pkg $$name: left to make fuzz (past FUZZ_TOTAL=$(FUZZ_TOTAL)s; its seeds ran as tests)"; continue; fi; \
		echo "fuzz $$pkg $$name ($$budget)"; n=$$((n+1)); \
		$(HANG_BOUND) $(FUZZ_BOUND) $(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$$budget -fuzzminimizetime=200x $$pkg; \
	done; \
	echo "fuzz-short: $$n target(s) fuzzed in $$(( $$(date +%s) - start )) s; $$left left to make fuzz"

## fuzz: longer fuzzing (FUZZTIME=5m make fuzz for more).
fuzz:
	$(MAKE) fuzz-short FUZZTIME=$${FUZZTIME:-2m} FUZZ_BOUND=0

## stress: long race and concurrency runs (CAPFS_STRESS=1 scales the bounded tests up), then
## pjdfstest's whole suite on the physical, memory and lazy mounts (PJDFSTEST_TARGETS picks some).
stress:
	set -o pipefail; CAPFS_STRESS=1 $(GO) test -race -count=1 -timeout 90m -v -run 'Concurren|Race|Stress' $(PKGS) \
		| grep -E '^(--- FAIL|FAIL|ok|panic|physical race)|raced operations|alias stress:|sqlite crash:'
	sh fuseexport/pjdfstest.sh

## bench: our figures next to peers' from the same run, as ratios.
bench:
	$(GO) run ./bench/cmd/benchtable
	$(GO) run ./bench/cmd/archivebench -count 3
	CAPFS_BENCH_FUSE=1 $(GO) test -count=1 -run '^TestFUSEToolsTable$$' -v -timeout 20m ./bench

lint: fmt-check vet staticcheck

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck: tools
	$(STATICCHECK) $(PKGS)

tools: $(STATICCHECK) bazel-remote

# bazel-remote v2.6.2 (tools/go.mod) for backends/cas/remote's integration tests
# and the cas bench, built ahead where the tests look for it; they build it
# themselves, or skip saying why, when it is not there.
bazel-remote:
	-@test -x $${TMPDIR:-/tmp}/capfs-bazel-remote-v2.6.2 || (cd tools && $(HANG_BOUND) 10m $(GO) build -o $${TMPDIR:-/tmp}/capfs-bazel-remote-v2.6.2 github.com/buchgr/bazel-remote/v2)

$(STATICCHECK):
	$(HANG_BOUND) 10m $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

clean:
	$(GO) clean -testcache
