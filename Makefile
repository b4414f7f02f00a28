# The README's two commands: `make demo` and `make test`. Both set up what is missing first.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
ENV_FILE := $(BUILD_DIR)/.setup.env
CTEST_ARGS ?=
BENCH_GPU_ARGS ?=

.PHONY: all deps configure build test demo image image-from-tree bench-cpu bench-cpu-workers bench-cpu-ddp bench-gpu bench-loader clean

all: build

# Debian packages and LibTorch (the pinned torch wheel, cached outside the checkout); where the
# machine has no CUDA toolkit and torch is a CUDA build, one made from PyPI wheels (CUDA_TOOLKIT_ROOT).
deps: $(ENV_FILE)
$(ENV_FILE): scripts/setup.sh
	bash scripts/setup.sh $(ENV_FILE)

configure: $(BUILD_DIR)/build.ninja
$(BUILD_DIR)/build.ninja: $(ENV_FILE) CMakeLists.txt
	. ./$(ENV_FILE) && cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_PREFIX_PATH="$$TORCH_PREFIX" -DMGPU_PYTHON="$$MGPU_PYTHON" \
	  -DMGPU_TEST_PYTHON="$$MGPU_TEST_PYTHON" -DMGPU_NVJPEG_INCLUDE_DIR="$$NVJPEG_INCLUDE_DIR" \
	  $${CUDA_TOOLKIT_ROOT:+-DCUDA_TOOLKIT_ROOT_DIR="$$CUDA_TOOLKIT_ROOT" -DCUDAToolkit_ROOT="$$CUDA_TOOLKIT_ROOT" \
	    -DCMAKE_CUDA_COMPILER="$$CUDA_TOOLKIT_ROOT/bin/nvcc"}

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure --timeout 600 $(CTEST_ARGS)

demo: build
	$(BUILD_DIR)/bin/mgpu demo

# The container image of docker/Dockerfile, built from source inside it (scripts/setup.sh and
# `make build`), with docker or podman, whichever works here (scripts/build_image.sh says which,
# and which base); image-from-tree builds only its runtime stage from this tree's binaries.
image:
	bash scripts/build_image.sh

image-from-tree: build
	bash scripts/build_image.sh --from-tree $(BUILD_DIR)

bench-cpu: build
	bash bench/cpu_lenet.sh $(BUILD_DIR)

# The num_workers table (LeNet, affine augmentation, 0/2/4 workers) against PyTorch + torchvision;
# the set-up step adds torchvision and Pillow (bench/bench-requirements.txt) to a bench-only venv once.
bench-cpu-workers: build
	bash bench/setup_bench_env.sh $(BUILD_DIR)
	bash bench/cpu_lenet_workers.sh $(BUILD_DIR)

# DDP over Gloo, 2 processes: mgpu-worker against PyTorch's DistributedDataParallel.
bench-cpu-ddp: build
	bash bench/cpu_ddp.sh $(BUILD_DIR)

# The streaming image loader (decode + RandomResizedCrop(224) + flip + normalize, batch 256) against
# PyTorch's DataLoader + torchvision at 0/2/4/8 workers on 20,000 generated JPEGs, and its peak RSS on a
# folder 10x larger than memory decoded (bench/loader_throughput.sh; results in bench/results/DATE-HOST-loader/).
bench-loader: build
	bash bench/setup_bench_env.sh $(BUILD_DIR)
	bash bench/loader_throughput.sh $(BUILD_DIR)/bin/mgpu-loader-bench \
	  $${MGPU_BENCH_PYTHON:-$${MGPU_CACHE:-$$HOME/.cache/mgpu}/venv-bench/bin/python}

# Every GPU claim against PyTorch on a GPU host (bench/run_all.sh; results in bench/results/DATE-HOST-run-all/);
# BENCH_GPU_ARGS=--full runs the whole matrix instead of the rows the targets read, "--only e2e,strongest"
# some steps. The end-to-end and loader steps' PyTorch side needs the bench venv (torchvision); without it
# those steps say so and the others run.
bench-gpu: build
	bash bench/setup_bench_env.sh $(BUILD_DIR) || echo "bench-gpu: no bench venv; the e2e step will say why" >&2
	. ./$(ENV_FILE) && MGPU_PYTHON="$$MGPU_PYTHON" bash bench/run_all.sh $(BENCH_GPU_ARGS) $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
