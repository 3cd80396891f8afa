# Quick start: `make demo` and `make test`. Each sets up what it needs in ./.venv.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP_TF := $(VENV)/.stamp-tf
STAMP_TEST := $(VENV)/.stamp-test
STAMP_BENCH := $(VENV)/.stamp-bench
# What the install builds from: an edited C loop (wire decoder, encoder) is rebuilt by the next make.
BUILD_INPUTS := pyproject.toml setup.py tracebridge/readers/_wirec.c tracebridge/writers/_protowirec.c \
	tracebridge/analysis/run/_groupc.c tracebridge/model/_lanesc.c
# The checkout is installed editable as a path in a .pth file (setuptools' compat mode), not
# through its default import hook: the hook's finder imports pathlib and urllib at every
# Python start, 14-17 ms of each CLI command and test subprocess (a user's `pip install`
# has none). Where a setuptools no longer has that mode, the default install is made.
COMPAT := --config-settings editable_mode=compat

.PHONY: demo check test test-onednn test-fast bench clean fuzz

# The check tier (`make check`, about a minute): no TensorFlow, no browsers, nothing slow.
# It reads TF captures from files recorded once (tests/data, tools/gen_test_data.py) and
# calls the CLI in-process. `make test` runs it all: that is what CI runs.
CHECK_MARKERS := not tf and not slow and not browser
# Tests run in parallel (pytest-xdist), each test file in one worker so that its module
# fixtures (captures made in subprocesses, loaded models) are made once.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile
# Timing measured live while another worker runs is no fact a test can assert (issue 30): the
# tests that still assert some (gross effects, 3x margins or more) are marked `serial`, and
# each test target runs them in a pass of their own after the parallel one, with no xdist
# worker beside them (tests/conftest.py, "live timing"). Exit status 5: the selection was empty.
SERIAL := -p no:xdist -m
NONE_SELECTED_OK := || test $$? -eq 5

# Tests whose results depend on the TensorFlow build (kernel names, fusions, the allocator):
# captures, what is read from them, round trips and compare. `make test` runs the whole
# suite without oneDNN (or as TF_ENABLE_ONEDNN_OPTS says, when it is set), then these
# TF-marked tests again with oneDNN (docs/reading.md: "TF builds").
BUILD_TESTS := tests/test_capture_session.py tests/test_capture_tf2.py tests/test_readers.py \
	tests/test_roundtrip.py tests/test_tensorboard.py tests/test_compare.py tests/test_compare_models.py \
	tests/test_demo.py tests/test_cli.py tests/test_compat_session.py tests/test_compat_timeline.py \
	tests/test_compat_tfvis.py tests/test_compat_profiler_hook.py tests/test_protos.py \
	tests/test_bad_input.py tests/test_html.py tests/test_steps_formats.py tests/test_hosts.py \
	tests/test_findings.py tests/test_performance_examples.py tests/test_xla.py \
	tests/test_xla_findings.py

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_TF): $(BUILD_INPUTS) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[tf]' $(COMPAT) || $(BIN)/python -m pip install --quiet -e '.[tf]'
	touch $@

$(STAMP_TEST): $(BUILD_INPUTS) $(STAMP_TF)
	$(BIN)/python -m pip install --quiet -e '.[tf,test,pandas,migrate,dask]' $(COMPAT) || $(BIN)/python -m pip install --quiet -e '.[tf,test,pandas,migrate,dask]'
	touch $@

demo: $(STAMP_TF)
	$(BIN)/tracebridge demo

check: $(STAMP_TEST)
	TRACEBRIDGE_CHECK_TIER=1 $(BIN)/python -m pytest -q $(XDIST) -m "$(CHECK_MARKERS)"

test: $(STAMP_TEST)
	bash tests/viewers/setup.sh $(VENV)
	TF_ENABLE_ONEDNN_OPTS=$${TF_ENABLE_ONEDNN_OPTS:-0} $(BIN)/python -m pytest -q $(XDIST) -m "not serial"
	TF_ENABLE_ONEDNN_OPTS=$${TF_ENABLE_ONEDNN_OPTS:-0} $(BIN)/python -m pytest -q $(SERIAL) "serial" $(NONE_SELECTED_OK)
	$(MAKE) --no-print-directory test-onednn

test-onednn: $(STAMP_TEST)
	TF_ENABLE_ONEDNN_OPTS=1 $(BIN)/python -m pytest -q $(XDIST) -m "tf and not browser and not serial" $(BUILD_TESTS)
	TF_ENABLE_ONEDNN_OPTS=1 $(BIN)/python -m pytest -q $(SERIAL) "tf and not browser and serial" $(BUILD_TESTS) \
		$(NONE_SELECTED_OK)

test-fast: check

# The peers the benchmarks run beside tracebridge (xprof-rs: the bench extra).
$(STAMP_BENCH): $(BUILD_INPUTS) $(STAMP_TEST)
	$(BIN)/python -m pip install --quiet -e '.[tf,test,pandas,migrate,dask,bench]' $(COMPAT) || $(BIN)/python -m pip install --quiet -e '.[tf,test,pandas,migrate,dask,bench]'
	touch $@

bench: $(STAMP_BENCH)
	bash tests/viewers/setup.sh $(VENV)
	$(BIN)/python bench/run_all.py

# Not in CI: a long run of random malformed inputs for every reader (tests/fuzz.py; failing
# inputs are saved in bench/out/fuzz-findings), then the property tests with many more examples.
# The fuzzer's workers read with the C wire decoder built again with AddressSanitizer and
# UBSan (into its own folder; the package's build is untouched), so an access out of bounds
# or undefined behaviour in it is a finding, not a silent corruption. The interpreter is not
# instrumented, hence libasan preloaded; PYTHONMALLOC=malloc puts small objects (bytes read
# from a file) in malloc's blocks, where ASan sees their ends; leaks are not checked
# (CPython keeps memory at exit).
FUZZ_CASES ?= 100000
FUZZ_SECONDS ?= 5400
FUZZ_SEED ?= 1
FUZZ_OUT ?= bench/out/fuzz-findings
FUZZ_WIREC := bench/out/wirec-sanitized/_wirec.so
fuzz: $(STAMP_TEST)
	mkdir -p $(dir $(FUZZ_WIREC)) $(FUZZ_OUT)
	$(CC) -shared -fPIC -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
		-I"$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
		tracebridge/readers/_wirec.c -o $(FUZZ_WIREC)
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so)" PYTHONMALLOC=malloc \
		ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:log_path=$(FUZZ_OUT)/sanitizer \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(FUZZ_OUT)/sanitizer \
		$(BIN)/python tests/fuzz.py --cases $(FUZZ_CASES) --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED) \
		--out $(FUZZ_OUT) --wirec $(FUZZ_WIREC)
	TRACEBRIDGE_HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_properties.py --hypothesis-show-statistics

clean:
	rm -rf $(VENV) tracebridge-demo bench/out
