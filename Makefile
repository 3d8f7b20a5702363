# crema's front door for people used to Caffe's `make`: it reads Makefile.config and drives CMake, which is
# the one real build system (CMakeLists.txt). `make help` lists the targets and settings.

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
.DEFAULT_GOAL := all
# The targets below run in the order they are listed even under `make -j`: installing packages, configuring,
# building, converting data and training must not overlap. The build itself runs JOBS compilations at once.
.NOTPARALLEL:

# ---- settings ----------------------------------------------------------------------------------------------
# Makefile.config (copied from Makefile.config.example) is optional; `make CONFIG_FILE= ...` ignores it.
# Settings given on the command line win over it.
CONFIG_FILE ?= Makefile.config
-include $(CONFIG_FILE)

CPU_ONLY ?= 0
USE_CUDNN ?= 1
USE_NCCL ?= 1
USE_MPI ?= 1
USE_ONEDNN ?= 1
BLAS ?= openblas
CUDA_ARCH ?=
DEBUG ?= 0
WERROR ?= 0
BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# 1 (Caffe's spelling) or ON turns a switch on; anything else turns it off.
on_off = $(if $(filter 1 ON on,$(strip $(1))),ON,OFF)
empty :=
space := $(empty) $(empty)

# Caffe's Makefile.config calls OpenBLAS `open`; both spellings are accepted.
ifneq ($(filter open openblas OpenBLAS,$(strip $(BLAS))),)
  CMAKE_BLAS := openblas
else
  BLAS_ERROR := BLAS = '$(strip $(BLAS))' is not supported: crema links OpenBLAS only (BLAS := openblas)
endif

ifneq ($(findstring gencode,$(CUDA_ARCH))$(findstring sm_,$(CUDA_ARCH)),)
  ARCH_ERROR := CUDA_ARCH takes CMake architecture numbers such as 90 or "80 90", not nvcc flags \
    ($(strip $(CUDA_ARCH)))
endif
ifneq ($(strip $(CUDA_ARCH)),)
  CMAKE_ARCH_OPTION := -DCMAKE_CUDA_ARCHITECTURES="$(subst $(space),;,$(strip $(CUDA_ARCH)))"
endif

CMAKE_OPTIONS := $(strip -DCMAKE_BUILD_TYPE=$(if $(filter 1,$(strip $(DEBUG))),Debug,Release) \
  -DCREMA_CPU_ONLY=$(call on_off,$(CPU_ONLY)) \
  -DCREMA_USE_CUDNN=$(call on_off,$(USE_CUDNN)) \
  -DCREMA_USE_NCCL=$(call on_off,$(USE_NCCL)) \
  -DCREMA_USE_MPI=$(call on_off,$(USE_MPI)) \
  -DCREMA_USE_ONEDNN=$(call on_off,$(USE_ONEDNN)) \
  -DCREMA_BLAS=$(CMAKE_BLAS) \
  -DCREMA_WARNINGS_AS_ERRORS=$(call on_off,$(WERROR)) \
  $(CMAKE_ARCH_OPTION))

# ---- configure ---------------------------------------------------------------------------------------------
# CMake options are passed only when configuring. The options of the last configure are kept beside the
# cache; configuring happens again when they differ (a changed setting) or when Makefile.config changes.
CMAKE_CACHE := $(BUILD_DIR)/CMakeCache.txt
OPTIONS_RECORD := $(BUILD_DIR)/make-cmake-options.txt
PREVIOUS_OPTIONS := $(strip $(file <$(OPTIONS_RECORD)))
ifneq ($(PREVIOUS_OPTIONS),$(strip $(CMAKE_OPTIONS)))
  RECONFIGURE := force-configure
endif
# CMake sets its default CUDA architectures only while it probes the compiler, on a build tree's first
# configure. So when CUDA_ARCH is dropped, the cache and the probe results (CMakeFiles/<cmake version>/) go,
# and CMakeLists.txt's rule (this machine's GPU, else nvcc's default) decides again; the objects stay.
ifeq ($(strip $(CUDA_ARCH)),)
  ifneq ($(findstring CMAKE_CUDA_ARCHITECTURES,$(PREVIOUS_OPTIONS)),)
    FRESH_CONFIGURE := rm -rf $(BUILD_DIR)/CMakeCache.txt $(BUILD_DIR)/CMakeFiles/[0-9]*
  endif
endif

$(CMAKE_CACHE): $(wildcard $(CONFIG_FILE)) $(RECONFIGURE)
	$(if $(BLAS_ERROR),$(error $(BLAS_ERROR)))
	$(if $(ARCH_ERROR),$(error $(ARCH_ERROR)))
	$(FRESH_CONFIGURE)
	cmake -S . -B $(BUILD_DIR) $(CMAKE_OPTIONS)
	@printf '%s\n' '$(CMAKE_OPTIONS)' > $(OPTIONS_RECORD)
	@touch $@

# ---- the relocatable bundle (docs/bundle.md) ------------------------------------------------------------------
# A second, fixed configuration in its own build tree, whatever the settings above: libcrema.so shared by the
# tools and tests, no OpenCV (its image codecs pull in some 200 MB of libraries), CUDA for one architecture.
BUNDLE_DIR ?= build-bundle
BUNDLE_CUDA_ARCH ?= 90
BUNDLE_ONEDNN ?= 1
BUNDLE_FASHION_MNIST ?= 0
BUNDLE_OPTIONS := -DCMAKE_BUILD_TYPE=Release -DCREMA_SHARED_CORE=ON -DCREMA_USE_OPENCV=OFF -DCREMA_CPU_ONLY=OFF \
  -DCREMA_USE_CUDNN=ON -DCREMA_USE_NCCL=ON -DCREMA_USE_MPI=OFF -DCREMA_USE_ONEDNN=$(call on_off,$(BUNDLE_ONEDNN)) \
  -DCREMA_BLAS=openblas -DCREMA_WARNINGS_AS_ERRORS=OFF \
  -DCMAKE_CUDA_ARCHITECTURES="$(subst $(space),;,$(strip $(BUNDLE_CUDA_ARCH)))"

# ---- sanitizers and fuzzing (docs/reliability.md) --------------------------------------------------------------
# A third fixed configuration in its own build tree: clang, AddressSanitizer and UndefinedBehaviorSanitizer on
# every object, libFuzzer's instrumentation, the CPU only. `make sanitize` runs the whole test suite there (any
# sanitizer report fails the test that made it); `make fuzz` runs each fuzz target for FUZZ_SECONDS.
SANITIZE_DIR ?= build-sanitize
FUZZ_SECONDS ?= 60
SANITIZE_OPTIONS := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only" -DCREMA_CPU_ONLY=ON -DCREMA_USE_MPI=OFF \
  -DCREMA_USE_ONEDNN=$(call on_off,$(USE_ONEDNN)) -DCREMA_BLAS=openblas -DCREMA_SANITIZE=address,undefined \
  -DCREMA_FUZZ=ON -DCREMA_WARNINGS_AS_ERRORS=$(call on_off,$(WERROR)) -DCREMA_TEST_WHOLE_BINARIES=ON
# intercept_tls_get_addr=0: clang 14's runtime sizes a dynamically allocated TLS block by a guess (a block 16 bytes
# into a page is taken for glibc's own layout and its "header" read) that a small malloc'd block of a dlopen'd
# library can meet by chance; LeakSanitizer then scans a made-up range and dies ("Tracer caught signal 11"), as
# `crema train` on an ImageData net did once the heap's layout moved. Without the interception those blocks are
# still found, as heap blocks the thread's DTV points to.
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1:detect_stack_use_after_return=1:intercept_tls_get_addr=0 \
  UBSAN_OPTIONS=print_stacktrace=1

# ---- targets -----------------------------------------------------------------------------------------------
# The demo and `make data` build in a tree of their own, for the CPU only (the demo trains on the CPU), and only
# the two programs they run: on a machine with the CUDA toolkit, the GPU code and the tests are `make`'s and `make
# test`'s. The settings of Makefile.config apply, but for CPU_ONLY and the tests.
DEMO_DIR ?= build-demo
DEMO_OPTIONS := $(filter-out -DCREMA_CPU_ONLY=%,$(CMAKE_OPTIONS)) -DCREMA_CPU_ONLY=ON -DCREMA_BUILD_TESTS=OFF
DEMO_LOG := $(DEMO_DIR)/demo_train.log
LENET_SOLVER := examples/fashion_mnist/lenet_solver.prototxt

DEMO_TARGETS := crema convert_mnist

.PHONY: all demo-build deps test data demo finetune bundle sanitize-build sanitize tsan fuzz clean format help force-configure

# cmake --build runs its own make (or ninja) with JOBS workers. This make's flags are not handed down, so a
# top-level `make -j` neither shares its job slots with it nor warns about them.
all: $(CMAKE_CACHE)
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cmake --build $(BUILD_DIR) -j $(JOBS)

# Configuring again each time is cheap and keeps the demo tree's options whatever it held before.
demo-build:
	$(if $(filter-out . .. / ./,$(strip $(DEMO_DIR))),,$(error refusing to build in DEMO_DIR = '$(DEMO_DIR)'))
	$(if $(BLAS_ERROR),$(error $(BLAS_ERROR)))
	cmake -S . -B $(DEMO_DIR) $(DEMO_OPTIONS)
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cmake --build $(DEMO_DIR) -j $(JOBS) --target $(DEMO_TARGETS)

deps:
	scripts/install_deps.sh

# ctest runs JOBS tests at once, each with as many OpenMP threads as cores: OpenMP threads that spin while they wait
# (libgomp's default) then take the cores from the other tests' threads. Waiting threads sleep instead in the tests'
# runs (the whole suite: 575 s -> 430 s on 2 cores); crema's own runs keep the default. OMP_WAIT_POLICY given to
# make wins.
TEST_ENV := OMP_WAIT_POLICY=$(or $(OMP_WAIT_POLICY),passive)

test: deps all
	cd $(BUILD_DIR) && $(TEST_ENV) ctest --output-on-failure -j $(JOBS)

data: demo-build
	CREMA_BUILD_DIR=$(abspath $(DEMO_DIR)) bash data/fashion_mnist/get_fashion_mnist.sh

demo: deps demo-build data
	GLOG_logtostderr=1 $(DEMO_DIR)/tools/crema train --solver=$(LENET_SOLVER) 2>&1 | tee $(DEMO_LOG)
	@awk 'match($$0, /Iteration [0-9]+/) { iteration = substr($$0, RSTART + 10, RLENGTH - 10) } \
	     /Test net output #[0-9]+: accuracy = / { accuracy = $$NF; tested_at = iteration } \
	     END { if (accuracy == "") { print "demo: no test accuracy in $(DEMO_LOG)" > "/dev/stderr"; exit 1 } \
	           printf "LeNet on Fashion-MNIST: test accuracy %.4f after %s iterations\n", accuracy, tested_at }' \
	     $(DEMO_LOG)

# The fine-tuning example (examples/finetune/README.md): LeNet's Fashion-MNIST layers reused for tops vs shoes.
finetune: deps all data
	CREMA_BUILD_DIR=$(abspath $(BUILD_DIR)) bash examples/finetune/run_finetune.sh

# Configuring again each time is cheap and keeps the bundle's options whatever the tree held before.
bundle: deps
	$(if $(filter-out . .. / ./,$(strip $(BUNDLE_DIR))),,$(error refusing to build in BUNDLE_DIR = '$(BUNDLE_DIR)'))
	@test -x /usr/local/cuda/bin/nvcc || { echo "bundle: needs the CUDA toolkit (/usr/local/cuda/bin/nvcc)" >&2; \
	  exit 1; }
	cmake -S . -B $(BUNDLE_DIR) $(BUNDLE_OPTIONS)
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cmake --build $(BUNDLE_DIR) -j $(JOBS)
	BUNDLE_FASHION_MNIST=$(call on_off,$(BUNDLE_FASHION_MNIST)) scripts/make_bundle.sh $(BUNDLE_DIR)

# Configuring again each time is cheap; the compiler is clang from the tree's first configure on.
sanitize-build:
	$(if $(filter-out . .. / ./,$(strip $(SANITIZE_DIR))),,$(error refusing to build in SANITIZE_DIR = '$(SANITIZE_DIR)'))
	scripts/install_deps.sh sanitize
	CC=clang CXX=clang++ cmake -S . -B $(SANITIZE_DIR) $(SANITIZE_OPTIONS)
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cmake --build $(SANITIZE_DIR) -j $(JOBS)

# Under the sanitizers the ImageNet-size example nets (CaffeNet, AlexNet, GoogLeNet, ResNet-50, R-CNN) took half
# the test run (1368 of 2766 test-seconds; 24 min on 2 cores), over code their small siblings (LeNet, CIFAR-10,
# ...) run there too. The long training runs (the example solvers to an accuracy, Fashion-MNIST's hundreds of
# iterations and ten thousand test images, the ImageNet nets against OpenCV) took another 300: they repeat, many
# times over, code the solver, tool and layer tests run under the sanitizers once. The main build's `make test`
# runs them all; SANITIZE_EXCLUDE= runs everything here too. Likewise the lanes' and step graph's checks over
# GoogLeNet and ResNet-50 (some 40 test-seconds here), whose code the towers nets run under the sanitizers, and the
# ONNX exports of the ImageNet nets read back by OpenCV (114 test-seconds), whose layers the exports of LeNet, CIFAR-10,
# a ResNet-shaped net and the layer collections run there. And the fuzz targets' runs over their seeds, whole and
# damaged, which `make fuzz` runs over the same seeds and their mutations under the same sanitizers (the former crashes
# still run here), and the crash-safety tests that kill training runs
# at random moments (some 70 test-seconds), whose snapshot writes the CLI and snapshot tests run there.
# The tests run a binary at a time here (CREMA_TEST_WHOLE_BINARIES, tests/CMakeLists.txt), so these are GoogleTest
# patterns (':'-separated, '*' any text), which GTEST_FILTER leaves out of every binary.
SANITIZE_EXCLUDE ?= *ExamplesTest.*/imagenet_*:*ExamplesTest.*/rcnn_*:SolverExamplesTest.*:FashionMnistTest.*:$\
  ClassifyFashionMnistTest.*:OpenCvInteropTest.CaffeNetAgrees*:OpenCvInteropTest.GoogLeNetAgrees*:$\
  OnnxExportTest.CaffeNet*:OnnxExportTest.GoogLeNet*:OnnxExportTest.AlexNetAnd*:OnnxExportTest.ResNet50And*:$\
  LanesTest.GoogLeNet*:LanesMemoryPlanTest.*:*StepGraphExamplesTest.*/googlenet_*:$\
  *StepGraphExamplesTest.*/resnet50_*:FuzzTargetsTest.SeedsAreAccepted*:FuzzTargetsTest.DamagedSeeds*:*CrashSafetyTest.*
sanitize: sanitize-build
	cd $(SANITIZE_DIR) && $(SANITIZER_ENV) $(TEST_ENV) $(if $(SANITIZE_EXCLUDE),GTEST_FILTER='-$(SANITIZE_EXCLUDE)') \
	  ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer over the execution lanes' tests (docs/architecture.md, "Execution lanes") and the thread groups of
# data parallelism ("Data parallelism"): clang, LLVM's OpenMP
# and its Archer tool (which tells ThreadSanitizer about OpenMP's fork, join and barriers), the CPU only, without
# oneDNN (a library built against GNU OpenMP, whose synchronisation ThreadSanitizer cannot see). Only those two
# test programs are built; any report fails them. LLVM's OpenMP library is not instrumented: what it does inside itself
# (its own locks) is left out (ignore_noninstrumented_modules). With the runner's lock taken out around a finished
# step's bookkeeping, this run reports the race (checked by hand).
TSAN_DIR ?= build-tsan
TSAN_OPTIONS_CMAKE := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCREMA_CPU_ONLY=ON -DCREMA_USE_MPI=OFF \
  -DCREMA_USE_ONEDNN=OFF -DCREMA_BLAS=openblas -DCREMA_SANITIZE=thread -DCREMA_WARNINGS_AS_ERRORS=$(call on_off,$(WERROR))
TSAN_FILTER ?= StepLanesTest.*:LanesTest.*:ContextTest.*
# And the data-parallel groups whose members are threads (solvers training side by side, their collectives).
TSAN_GROUP_FILTER ?= ThreadGroupTest.*:DataParallelTest.TwoSolversOnThreads*
tsan:
	$(if $(filter-out . .. / ./,$(strip $(TSAN_DIR))),,$(error refusing to build in TSAN_DIR = '$(TSAN_DIR)'))
	scripts/install_deps.sh sanitize
	CC=clang CXX=clang++ cmake -S . -B $(TSAN_DIR) $(TSAN_OPTIONS_CMAKE)
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cmake --build $(TSAN_DIR) --target test_lanes test_data_parallel -j $(JOBS)
	cd $(TSAN_DIR)/tests && OMP_TOOL_LIBRARIES="$$(ls /usr/lib/llvm-*/lib/libarcher.so | head -n 1)" \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1" OPENBLAS_NUM_THREADS=1 \
	  ./test_lanes --gtest_filter='$(TSAN_FILTER)'
	cd $(TSAN_DIR)/tests && OMP_TOOL_LIBRARIES="$$(ls /usr/lib/llvm-*/lib/libarcher.so | head -n 1)" \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1" OPENBLAS_NUM_THREADS=1 \
	  ./test_data_parallel --gtest_filter='$(TSAN_GROUP_FILTER)'

fuzz: sanitize-build
	scripts/fuzz.sh $(SANITIZE_DIR) $(FUZZ_SECONDS)

clean:
	$(if $(filter-out . .. / ./,$(strip $(BUILD_DIR))),,$(error refusing to remove BUILD_DIR = '$(BUILD_DIR)'))
	$(if $(filter-out . .. / ./,$(strip $(DEMO_DIR))),,$(error refusing to remove DEMO_DIR = '$(DEMO_DIR)'))
	rm -rf $(BUILD_DIR) $(DEMO_DIR)

FORMAT_DIRS := src layers tools tests python/src
format:
	@command -v clang-format >/dev/null || { echo "format: clang-format not found: apt-get install clang-format" >&2; \
	  exit 1; }
	find $(FORMAT_DIRS) -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
	  -print0 | xargs -0 -r clang-format -i

force-configure:

help:
	@echo 'crema: make targets (settings come from Makefile.config, see Makefile.config.example)'
	@echo ''
	@echo '  make / make all   configure with CMake if needed, then build the library, tools and tests'
	@echo '  make deps         install the Debian 12 packages crema needs (scripts/install_deps.sh; root or sudo)'
	@echo '  make test         deps + all, then run every test: ctest --output-on-failure'
	@echo '  make data         convert Fashion-MNIST to data/fashion_mnist/*_lmdb (convert_mnist of $(DEMO_DIR))'
	@echo '  make finetune     the fine-tuning example: LeNet reused for tops vs shoes (examples/finetune/)'
	@echo '  make demo         deps, then builds only what the demo runs (crema and convert_mnist, CPU only,'
	@echo '                    in $(DEMO_DIR)/), converts the data, trains LeNet for 10,000 iterations on the'
	@echo '                    CPU and prints its test accuracy to four decimals (log: $(DEMO_LOG))'
	@echo '  make bundle       build the relocatable bundle for a GPU machine (tools, tests, libraries) in'
	@echo '                    $(BUNDLE_DIR)/ and pack $(BUNDLE_DIR)/crema-bundle.tar.xz (docs/bundle.md);'
	@echo '                    BUNDLE_CUDA_ARCH=90, BUNDLE_ONEDNN=1, BUNDLE_FASHION_MNIST=0 (1: carry the data set)'
	@echo '  make sanitize     build with clang, AddressSanitizer and UndefinedBehaviorSanitizer (CPU only) in'
	@echo '                    $(SANITIZE_DIR)/ and run every test there'
	@echo '  make tsan         build the execution lanes tests with clang and ThreadSanitizer in $(TSAN_DIR)/ and'
	@echo '                    run them (LLVM OpenMP with its Archer tool)'
	@echo '  make fuzz         the same build, then each libFuzzer target for FUZZ_SECONDS=$(FUZZ_SECONDS) s'
	@echo '                    (scripts/fuzz.sh; crashes are kept in $(SANITIZE_DIR)/fuzz/artifacts/)'
	@echo '  make clean        remove the build directories ($(BUILD_DIR), $(DEMO_DIR))'
	@echo '  make format       clang-format -i over src layers tools tests python/src'
	@echo '  make help         this text'
	@echo ''
	@echo 'Settings (Makefile.config or the command line, e.g. `make CPU_ONLY=1 JOBS=8`):'
	@echo '  CPU_ONLY=1        build without CUDA                                   now: $(CPU_ONLY)'
	@echo '  USE_CUDNN=0|1     cuDNN engines (CUDA builds)                          now: $(USE_CUDNN)'
	@echo '  USE_NCCL=0|1      NCCL multi-GPU training (CUDA builds)                now: $(USE_NCCL)'
	@echo '  USE_MPI=0|1       MPI multi-process training                           now: $(USE_MPI)'
	@echo '  BLAS=openblas     the BLAS library (only OpenBLAS is supported)        now: $(BLAS)'
	@echo '  CUDA_ARCH=90      CUDA architectures, e.g. 90 or "80 90" (unset: this'
	@echo '                    machine'"'"'s GPU, else nvcc'"'"'s default)                  now: $(or $(strip $(CUDA_ARCH)),unset)'
	@echo '  DEBUG=1           Debug build instead of Release                       now: $(DEBUG)'
	@echo '  WERROR=1          treat compiler warnings as errors                    now: $(WERROR)'
	@echo '  BUILD_DIR=dir     where CMake builds                                   now: $(BUILD_DIR)'
	@echo '  JOBS=n            parallel compile and test jobs                       now: $(JOBS)'
	@echo '  CONFIG_FILE=file  settings file to read; empty reads none              now: $(CONFIG_FILE)'
