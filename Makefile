# The two commands of the README: `make run` and `make test`.

.PHONY: run test vet check-generated browser-notice generate build bench bench-peers lint-openapi screenshots

# `make run` builds bin/baton and runs `baton dev` rather than `go run`,
# which exits 1 whenever it is interrupted. Ctrl-C stops baton dev cleanly,
# removing its private cluster, with status 0, and make with it: on a
# terminal, baton dev runs as a job of its own in the foreground
# (`set -m; … & fg`), so that Ctrl-C reaches baton dev alone. GNU make that
# receives Ctrl-C itself waits for its recipe and then exits 130 whatever
# the recipe did, which is what a plain `./bin/baton dev` recipe gave.
# Ctrl-Z ends `make run` (status 2) and baton dev with it, cleanly. Without
# a terminal (CI, `make run </dev/null &`), baton dev runs as a plain
# command, and a SIGINT sent to make's whole process group makes make
# exit 130.
run: build
	@if [ -t 0 ] && { : </dev/tty; } 2>/dev/null; then set -m; ./bin/baton dev & fg; else exec ./bin/baton dev; fi

test: vet check-generated browser-notice
	go test -race -count=1 -timeout 15m ./...

# The console's browser tests need a Chromium, found as internal/browsertest
# finds it: BATON_CHROMIUM, else the first of CHROMIUM_NAMES on PATH.
# Without one they skip, unless BATON_REQUIRE_BROWSER is set (CI), and go
# test does not print skips: this says so before the tests run.
CHROMIUM_NAMES := chromium chromium-browser google-chrome
browser-notice:
	@if [ -z "$$BATON_CHROMIUM" ] && [ -z "$$BATON_REQUIRE_BROWSER" ]; then \
		for name in $(CHROMIUM_NAMES); do command -v $$name >/dev/null 2>&1 && exit 0; done; \
		echo "make test: no Chromium (BATON_CHROMIUM, or $(CHROMIUM_NAMES) on PATH): the console's browser tests will be skipped; apt-get install chromium to run them"; \
	fi

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	go vet ./...
	cd bench/peers && go vet ./...

# db/dbsqlc must be exactly what sqlc generates from db/queries and db/migrations.
check-generated:
	cd tools && go tool sqlc -f ../sqlc.yaml diff

generate:
	cd tools && go tool sqlc -f ../sqlc.yaml generate

# Lints the API contract (httpapi/openapi.yaml) with Redocly's
# recommended-strict rules, where every warning fails; the known exceptions,
# each with its reason, are in httpapi/.redocly.lint-ignore.yaml. Needs
# Node.js (npx fetches the pinned Redocly CLI), so it is not part of
# `make test`; CI runs it after the tests. `make test` checks the document
# offline with kin-openapi and a strict OpenAPI 3.0 reading of its schemas.
REDOCLY ?= @redocly/cli@2.77.0
lint-openapi:
	cd httpapi && npx --yes $(REDOCLY) lint --extends recommended-strict --format stylish openapi.yaml

build:
	go build -o bin/baton ./cmd/baton

# Engine benchmarks (resume latency, timeout lateness, thread
# throughput and turn wait, inbound reply, lane admission, and what a
# settling start allocates). Not part of
# `make test`, which only compiles them.
bench:
	go test -run '^$$' -bench 'ResumeLatency|TimeoutLateness|HotThread|InboundReply|AdmissionWhenSlotFrees|SettlingStart' -benchtime 100x -timeout 30m ./engine/
	go test -run '^$$' -bench 'ManyThreads' -benchtime 1x -timeout 30m ./engine/

# The peer bench (bench/peers, a module of its own so that Baton never
# depends on DBOS): Baton against DBOS Transact for Go on one private
# PostgreSQL cluster, 5 interleaved rounds, ~15 min. PEERSFLAGS adds flags
# such as --rounds 1 --duration 2s or --json.
PEERSFLAGS ?=
bench-peers:
	cd bench/peers && go run . $(PEERSFLAGS)

# Fuzz targets for untrusted input: definitions,
# conditions, templates, /queue commands, request envelopes. Each runs for
# FUZZTIME, one target per `go test` (as -fuzz requires); FUZZFLAGS adds
# flags such as -parallel=1. A crasher is written to the package's
# testdata/fuzz/<target>/ and from then on fails `make test`.
# `make test` already runs the fuzz seed corpora as ordinary tests.
.PHONY: fuzz
FUZZTIME ?= 30s
FUZZFLAGS ?=
fuzz:
	go test -run '^$$' -fuzz '^FuzzDefinition$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./engine/workflow
	go test -run '^$$' -fuzz '^FuzzCondition$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./engine/workflow
	go test -run '^$$' -fuzz '^FuzzTemplate$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./engine/workflow
	go test -run '^$$' -fuzz '^FuzzQueueCommand$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./engine
	go test -run '^$$' -fuzz '^FuzzEnvelope$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./httpapi

# Rewrites the console's screenshots in docs/console/ (shown by docs/console.md
# and the README) from its browser tests; needs Chromium.
screenshots:
	BATON_SCREENSHOTS=$(CURDIR)/docs/console BATON_REQUIRE_BROWSER=1 go test -count=1 -run 'Browser|ReadOnlyToken' ./console/
