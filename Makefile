# Thin driver over CMake. `make run` and `make test` do all set-up on a fresh
# Debian 12 machine: they install the missing Debian packages, configure, build.

BUILD_PACKAGES := pkg-config libboost-dev libspdlog-dev libcli11-dev libmurmurhash-dev \
                  libxxhash-dev nlohmann-json3-dev libgtest-dev libssl-dev
TEST_PACKAGES  := redis-tools python3-redis
JOBS   ?= $(shell nproc)
PRESET ?= release
BUILD_DIR := build/$(PRESET)
ARGS ?=

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps test-deps configure build run test asan tsan format bench clean

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
	fi

test-deps:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(TEST_PACKAGES)"

configure: deps
	cmake --preset $(PRESET) >/dev/null

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	$(BUILD_DIR)/bloomery --bind 127.0.0.1 --port 6379 --dir ./data $(ARGS)

test: test-deps
	cmake --preset $(PRESET) >/dev/null
	cmake --build $(BUILD_DIR) -j $(JOBS)
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j 2

# Sanitizer builds of the whole suite.
asan: test-deps
	$(MAKE) --no-print-directory test PRESET=asan
tsan: test-deps
	$(MAKE) --no-print-directory test PRESET=tsan

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp')

clean:
	rm -rf build
