# Thin driver over CMake. `make run` and `make test` do all set-up on a fresh
# Debian 12 machine: they install the missing Debian packages, configure, build.

BUILD_PACKAGES := pkg-config libboost-dev libspdlog-dev libcli11-dev libmurmurhash-dev \
                  libxxhash-dev nlohmann-json3-dev libgtest-dev libjemalloc-dev libssl-dev
TEST_PACKAGES  := redis-tools python3-redis python3-prometheus-client openssl python3-yaml \
                  prometheus-redis-exporter etcd-server etcd-client
JOBS   ?= $(shell nproc)
PRESET ?= release
BUILD_DIR := build/$(PRESET)
ARGS ?=
CTEST_ARGS ?=

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps test-deps configure build run serve test asan tsan fuzz format format-check tidy bench clean

all: build

# Installs only what is missing, so a machine that has everything is not touched.
deps:
	@missing=""; for p in $(BUILD_PACKAGES) $(EXTRA_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	  case " $$missing " in *" etcd-server "*) \
	    if command -v systemctl >/dev/null 2>&1 && systemctl is-enabled --quiet etcd 2>/dev/null; then \
	      echo "etcd-server: the tests start their own members; its service is not left running"; \
	      $(SUDO) systemctl disable --now etcd >/dev/null 2>&1 || true; \
	    fi ;; \
	  esac; \
	fi

test-deps:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(TEST_PACKAGES)"

configure: deps
	cmake --preset $(PRESET) >/dev/null

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# `make run` serves on 127.0.0.1:6379 with data in ./data. Those defaults go
# in as BLOOMERY_* environment variables, so ARGS overrides any of them
# (make run ARGS="--port 6380"), and so does a --config file it names: flags
# win over the file, which wins over the environment.
SERVE_DEFAULTS := BLOOMERY_BIND=127.0.0.1 BLOOMERY_PORT=6379 BLOOMERY_DIR=./data

run: build
	@$(MAKE) --no-print-directory serve

# What `make run` runs once the build is done: the server of $(BUILD_DIR) as
# it is, nothing installed or built.
serve:
	$(SERVE_DEFAULTS) $(BUILD_DIR)/bloomery $(ARGS)

test: test-deps
	cmake --preset $(PRESET) >/dev/null
	cmake --build $(BUILD_DIR) -j $(JOBS)
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j 2 $(CTEST_ARGS)

# Sanitizer builds of the whole suite (TSan's without the few slow tests
# labelled skip-tsan in tests/CMakeLists.txt).
asan: test-deps
	$(MAKE) --no-print-directory test PRESET=asan
tsan: test-deps
	$(MAKE) --no-print-directory test PRESET=tsan CTEST_ARGS="-LE skip-tsan"

# libFuzzer and clang's sanitizer runtimes are in libclang-rt-14-dev, which
# clang only recommends; llvm-14 brings llvm-symbolizer for readable reports.
FUZZ_PACKAGES := clang libclang-rt-14-dev llvm-14
FUZZ_TARGETS  := resp_parser_fuzz snapshot_reader_fuzz command_fuzz loadchunk_fuzz journal_reader_fuzz \
                 replica_stream_fuzz rdb_reader_fuzz cuckoo_fuzz
FUZZ_SECONDS  ?= 60

# Builds the libFuzzer targets (build/fuzz) and runs each for FUZZ_SECONDS on a
# scratch copy of its committed corpus (tests/fuzz/corpus/<target>); any crash,
# leak, timeout (30 s per input) or RSS past 2 GB fails. Logs and any crashing
# input: build/fuzz/<target>.log, build/fuzz/artifacts/.
fuzz:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(FUZZ_PACKAGES)"
	cmake --preset fuzz >/dev/null
	cmake --build build/fuzz -j $(JOBS) --target fuzz_targets
	@mkdir -p build/fuzz/artifacts; \
	export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer; \
	for t in $(FUZZ_TARGETS); do \
	  work=build/fuzz/corpus/$$t; rm -rf $$work; mkdir -p $$work; \
	  cp tests/fuzz/corpus/$$t/* $$work/; \
	  dict=; [ -f tests/fuzz/$$t.dict ] && dict=-dict=tests/fuzz/$$t.dict; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  if ! build/fuzz/tests/fuzz/$$t $$dict -max_total_time=$(FUZZ_SECONDS) -timeout=30 \
	       -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build/fuzz/artifacts/$$t- \
	       $$work >build/fuzz/$$t.log 2>&1; then \
	    tail -n 60 build/fuzz/$$t.log; echo "fuzz: $$t FAILED (build/fuzz/$$t.log)"; exit 1; \
	  fi; \
	  grep -E '^#[0-9]+[[:space:]]+DONE' build/fuzz/$$t.log; \
	done

# Benchmarks (never run by `make test`; tests/bench/README.md). `make bench`
# builds the bench preset (release + Google Benchmark, build/bench) and runs
# the micro-benchmarks for BENCH_MIN_TIME seconds each; BENCH_ARGS passes more
# flags, e.g. BENCH_ARGS=--benchmark_filter=BM_Contains. The other packages
# are for tests/bench/load_bench.sh (redis-server to compare against,
# redis-benchmark, matplotlib for its plot) and tests/bench/profile.sh (perf).
BENCH_PACKAGES := libbenchmark-dev redis-server redis-tools python3-matplotlib linux-perf
BENCH_MIN_TIME ?= 0.2
BENCH_ARGS ?=
bench:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(BENCH_PACKAGES)"
	cmake --preset bench >/dev/null
	cmake --build build/bench -j $(JOBS) --target bloom_bench bloomery
	build/bench/tests/bench/bloom_bench --benchmark_min_time=$(BENCH_MIN_TIME) $(BENCH_ARGS)

# clang-format and clang-tidy from Debian (the .clang-format and .clang-tidy
# at the top say what they check).
LINT_PACKAGES := clang-format clang-tidy

format:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(LINT_PACKAGES)"
	clang-format -i $$(git ls-files '*.cpp' '*.hpp')

# Fails, naming the files, if any source is not as clang-format writes it.
format-check:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(LINT_PACKAGES)"
	clang-format --dry-run --Werror $$(git ls-files '*.cpp' '*.hpp')

# clang-tidy over every file under src/ (and the headers they include);
# any finding fails. build/tidy holds only the compile commands: nothing is
# built there. TIDY_SINCE=<commit> checks only what changed since that commit
# (.ci/tidy_files.sh: changed sources and every source including a changed
# header); CI passes the commit in .ci/tidy-clean, one whose every source is
# known clean (.ci/run says how it is kept).
TIDY_SINCE ?=
tidy:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(LINT_PACKAGES)"
	cmake -S . -B build/tidy -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
	      -DBLOOMERY_BUILD_TESTS=OFF >/dev/null
	@files=all; [ -z "$(TIDY_SINCE)" ] || files=$$(.ci/tidy_files.sh $(TIDY_SINCE)); \
	if [ -z "$$files" ]; then echo "tidy: nothing under src/ changed since $(TIDY_SINCE)"; exit 0; fi; \
	if [ "$$files" = all ]; then scope='$(CURDIR)/src/'; \
	else scope=$$(for f in $$files; do printf '%s$$ ' "$(CURDIR)/$$f"; done); \
	  echo "tidy: $$(echo $$files | wc -w) files changed since $(TIDY_SINCE)"; fi; \
	run-clang-tidy -p build/tidy -j $(JOBS) -quiet $$scope >build/tidy/report.txt 2>&1 || \
	  { grep -E 'warning:|error:' build/tidy/report.txt | sort -u; \
	    echo "tidy: FAILED (build/tidy/report.txt)"; exit 1; }
	@echo "tidy: clean"

clean:
	rm -rf build
