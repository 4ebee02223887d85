# shmbus: every test in one command (`make test`). It installs what it needs itself.
SHELL := /bin/bash
CARGO ?= cargo
LOOM_TARGET := target/loom
TSAN_TARGET := target/tsan
# The bench's optional iceoryx2 peer is built and tested too (about 90 s more on the first
# build on two cores; cached after).
BENCH_FEATURES := --features shmbus-bench/iceoryx2
# Async receive (crates/shmbus, feature `tokio`): its tests (tests/async_recv.rs), lints and
# docs are built with it on.
ASYNC_FEATURES := --features shmbus/tokio

.PHONY: test deps redis-server fmt clippy unit interop-venv node-interop loom tsan doc python demo bench-smoke clean-shm install-c bench-bindings

test: deps redis-server fmt clippy unit doc loom tsan python
	@echo "make test: all suites passed"

# Tools the suites need; each install is skipped when already present.
deps:
	@command -v cargo >/dev/null || { echo "cargo is required (install Rust via rustup)"; exit 1; }
	@rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt || true
	@# The C API's tests (crates/shmbus-ffi) compile C, and build against an install with
	@# pkg-config and CMake.
	@command -v cc >/dev/null && command -v pkg-config >/dev/null && command -v cmake >/dev/null || \
	  (apt-get update && apt-get install -y gcc pkg-config cmake)
	@# The C++ API's tests compile with both g++ and clang++.
	@command -v g++ >/dev/null && command -v clang++ >/dev/null || (apt-get update && apt-get install -y g++ clang)
	@# `shmbus export`'s tests scrape it with curl and validate the output with Prometheus's
	@# parser (promtool, in Debian's prometheus package).
	@command -v curl >/dev/null || (apt-get update && apt-get install -y curl)
	@command -v promtool >/dev/null || (apt-get update && apt-get install -y --no-install-recommends prometheus)
	@# `shmbus top`'s tests drive it in a real terminal.
	@command -v tmux >/dev/null || (apt-get update && apt-get install -y tmux)
	@# The bridge's tests make network namespaces (iproute2's `ip`) and TLS certificates
	@# (openssl).
	@command -v ip >/dev/null || (apt-get update && apt-get install -y iproute2)
	@command -v openssl >/dev/null || (apt-get update && apt-get install -y openssl)

fmt:
	$(CARGO) fmt --all --check

clippy:
	$(CARGO) clippy --workspace --all-targets $(BENCH_FEATURES) $(ASYNC_FEATURES) -- -D warnings

# Redis 7 (Debian's package) for the bench's Redis peers, and a TrueType font for the text
# of `shmbus-bench report`'s plots; each installed when missing.
redis-server:
	@command -v redis-server >/dev/null || (apt-get update && apt-get install -y redis-server)
	@test -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf || (apt-get update && apt-get install -y fonts-dejavu-core)

# Unit, integration, multi-process, SIGKILL, CLI and bench-smoke tests, in the `ci` profile
# (optimized, with debug assertions and overflow checks on).
unit: interop-venv node-interop
	SHMBUS_BENCH_REQUIRE_REDIS=1 SHMBUS_REQUIRE_INTEROP=1 $(CARGO) test --workspace --profile ci $(BENCH_FEATURES) $(ASYNC_FEATURES)

# Other projects' codecs (rosbags, protobuf, mcap) pinned in a scratch virtualenv,
# target/interop-venv, for shmbus-codec's interop tests; quick when already there.
interop-venv:
	scripts/interop-venv.sh

# The Foxglove WebSocket protocol's own client (@foxglove/ws-protocol, with ws) pinned in
# a scratch node_modules, target/node-interop, for shmbus-foxglove's interop tests; quick
# when already there.
node-interop:
	scripts/node-interop.sh

doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps $(ASYNC_FEATURES)

# Loom models of every lock-free protocol (tests/loom_<kind>.rs, over each kind's protocol,
# public under cfg(loom)). The other test files are gated off under loom;
# the check keeps every one of them building there.
LOOM_MODELS := $(patsubst crates/shmbus/tests/%.rs,--test %,$(wildcard crates/shmbus/tests/loom_*.rs))
loom:
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=$(LOOM_TARGET) $(CARGO) check -p shmbus --release --tests
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=$(LOOM_TARGET) $(CARGO) test -p shmbus --release $(LOOM_MODELS)

# ThreadSanitizer over the multi-thread tests. Needs nightly with rust-src; where that cannot
# be installed the suite says so and is skipped (it is not a substitute for the loom models).
tsan:
	@if rustup toolchain list 2>/dev/null | grep -q nightly && \
	   { rustup component list --toolchain nightly --installed 2>/dev/null | grep -q rust-src || rustup component add rust-src --toolchain nightly >/dev/null 2>&1; }; then \
	  echo "tsan: running the multi-thread tests under ThreadSanitizer"; \
	  RUSTFLAGS="-Zsanitizer=thread --cfg tsan" RUSTDOCFLAGS="-Zsanitizer=thread" TSAN_OPTIONS="suppressions=$(CURDIR)/.ci/tsan.supp halt_on_error=1" \
	  CARGO_TARGET_DIR=$(TSAN_TARGET) $(CARGO) +nightly test -Zbuild-std --target x86_64-unknown-linux-gnu -p shmbus --features tokio --lib --test topic --test pool_basic --test queue_api --test queue_waitset --test stream_waitset --test journal_basic --test async_recv --test service; \
	else echo "tsan: SKIPPED (nightly toolchain with rust-src not available here)"; fi

# The Python package (crates/shmbus-py) as users get it: one abi3 wheel, built once with
# maturin (the extension in the `ci` profile, in the shared target dir) into target/wheels,
# installed with pip into a scratch virtualenv (maturin, pytest, numpy and JAX's CPU wheels
# pinned; JAX imports DLPack tensors through the legacy ABI) where its tests run against it; then install-test/ installs the same wheel into a fresh virtualenv
# without cargo or rustc on PATH (the examples, auditwheel, mypy --strict on the stubs) and
# builds the sdist into a wheel.
PY_VENV := target/py-venv
PY_WHEELS := target/wheels
python:
	@python3 -c 'import venv, ensurepip' 2>/dev/null || (apt-get update && apt-get install -y python3-venv)
	test -x $(PY_VENV)/bin/python || python3 -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install -q maturin==1.15.0 pytest==9.0.3 numpy==2.4.6 jax==0.10.2 jaxlib==0.10.2
	rm -f $(PY_WHEELS)/shmbus-*.whl
	PATH=$(CURDIR)/$(PY_VENV)/bin:$$PATH maturin build -q --profile ci -m crates/shmbus-py/Cargo.toml \
	  -i $(PY_VENV)/bin/python --out $(PY_WHEELS)
	$(PY_VENV)/bin/pip install -q --force-reinstall --no-deps $(PY_WHEELS)/shmbus-*.whl
	SHMBUS_REQUIRE_INTEROP=1 $(PY_VENV)/bin/python -m pytest -q crates/shmbus-py/tests
	PATH=$(CURDIR)/$(PY_VENV)/bin:$$PATH SHMBUS_WHEEL=$$(ls $(PY_WHEELS)/shmbus-*.whl) \
	  $(PY_VENV)/bin/python -m pytest -q crates/shmbus-py/install-test

# The bindings' ping-pong benchmarks (not part of `make test`; see BENCHMARKS.md, "Bindings:
# how to run"). A scratch virtualenv with the shmbus package (release build), numpy and the
# peers (iceoryx2, pyzmq) at pinned versions; the C ping-pong program; then the Python table
# and the C (and C++) 8 B figures against Rust's of the same run.
# The C++ hook: when include/shmbus.hpp and crates/shmbus-ffi/bench/pingpong.cpp exist, that
# program is built too and run beside the C one (same options and JSON line as pingpong.c).
BENCH_VENV := target/bench-venv
BENCH_C := target/bench-c
BENCH_PY_ITERS ?= 100000
BENCH_FRAME_ITERS ?= 2000
BENCH_NATIVE_ITERS ?= 200000
BENCH_ROUNDS ?= 3
# The cargo profile of everything benchmarked (its binaries land in target/<profile>).
BENCH_PROFILE ?= release
BENCH_OUT := target/$(BENCH_PROFILE)
# The native libraries the Rust standard library needs when libshmbus.a is linked by hand.
C_STATIC_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
bench-bindings:
	@python3 -c 'import venv, ensurepip' 2>/dev/null || (apt-get update && apt-get install -y python3-venv)
	@command -v cc >/dev/null || (apt-get update && apt-get install -y gcc)
	test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q maturin==1.15.0 numpy==2.4.6 iceoryx2==0.9.3 pyzmq==27.3.0
	VIRTUAL_ENV=$(CURDIR)/$(BENCH_VENV) PATH=$(CURDIR)/$(BENCH_VENV)/bin:$$PATH maturin develop -q --profile $(BENCH_PROFILE) -m crates/shmbus-py/Cargo.toml
	$(CARGO) build --profile $(BENCH_PROFILE) -p shmbus-bench -p shmbus-ffi
	mkdir -p $(BENCH_C)
	cc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude crates/shmbus-ffi/bench/pingpong.c $(BENCH_OUT)/libshmbus.a $(C_STATIC_LIBS) -o $(BENCH_C)/pingpong
	@if [ -f include/shmbus.hpp ] && [ -f crates/shmbus-ffi/bench/pingpong.cpp ]; then \
	  command -v c++ >/dev/null || (apt-get update && apt-get install -y g++); \
	  echo "c++ -std=c++17 -O2 -Wall -Wextra -Werror -Iinclude crates/shmbus-ffi/bench/pingpong.cpp $(BENCH_OUT)/libshmbus.a $(C_STATIC_LIBS) -o $(BENCH_C)/pingpong-cpp"; \
	  c++ -std=c++17 -O2 -Wall -Wextra -Werror -Iinclude crates/shmbus-ffi/bench/pingpong.cpp $(BENCH_OUT)/libshmbus.a $(C_STATIC_LIBS) -o $(BENCH_C)/pingpong-cpp; \
	else rm -f $(BENCH_C)/pingpong-cpp; echo "bench-bindings: no C++ row (include/shmbus.hpp or crates/shmbus-ffi/bench/pingpong.cpp is missing)"; fi
	@# Both parts run even if the first has a failed row; the target fails if either did.
	$(BENCH_VENV)/bin/python scripts/bench-python.py --iters $(BENCH_PY_ITERS) --frame-iters $(BENCH_FRAME_ITERS) \
	  --floor $(BENCH_OUT)/shmbus-bench; py=$$?; \
	python3 scripts/bench-c.py --bench $(BENCH_OUT)/shmbus-bench --c $(BENCH_C)/pingpong \
	  $$(test -x $(BENCH_C)/pingpong-cpp && echo --cpp $(BENCH_C)/pingpong-cpp) --iters $(BENCH_NATIVE_ITERS) --rounds $(BENCH_ROUNDS); \
	c=$$?; test $$py = 0 && test $$c = 0

demo:
	$(CARGO) run --release --bin shmbus -- demo

# Installs the C API (libshmbus.so / .a, shmbus.h, pkg-config file, CMake package) under
# PREFIX (default /usr/local; DESTDIR for staged installs). See docs/c.md.
PREFIX ?= /usr/local
install-c:
	$(CARGO) build --release -p shmbus-ffi --lib
	crates/shmbus-ffi/install/install.sh "$(PREFIX)" target/release

# Removes stale test segments left in /dev/shm by interrupted runs.
clean-shm:
	rm -rf /dev/shm/shmbus-test-* /dev/shm/shmbus-bench-*
