#!/usr/bin/env bash
# llama-cpp-python's wheel, built once per machine and version with our CMake options;
# prints the folder that holds it (for pip's --find-links). `wheel.sh --cmake-args`
# prints the options alone (the benchmark builds llama-server with the same ones).
#
# Why not pip's own cache: it keys a built wheel by the sdist alone, whatever CMAKE_ARGS
# were, so a wheel built without these options would be reused silently.
#
# The options: llama.cpp tuned for this CPU, but without its AMX kernels. On Sapphire
# Rapids machines (AMX_INT8) ggml moves the weights to an AMX buffer and its matmul
# segfaults on the first prompt of more than one token (seen here with SmolLM2's Q4_1;
# ggml-org/llama.cpp#20824, open, and stanfordnlp/dspy#10079, which had to do the same).
# LLAMA_CMAKE_ARGS adds to them, after them, so that its -D options win over ours of the same
# name (e.g. "-DGGML_NATIVE=OFF" for a portable build, "-DGGML_CUDA=ON"): the AMX flags stay
# unless it sets CMAKE_C_FLAGS/CMAKE_CXX_FLAGS itself. The Makefile rebuilds when it changes.
#
# LLAMA_PORTABLE=1 builds the image's wheel instead (make wheelhouse): for any x86-64 CPU, every
# CPU variant llama.cpp has built as a module (GGML_BACKEND_DL, GGML_CPU_ALL_VARIANTS), of which
# the server loads the best for the CPU it runs on; no AMX variant (patches/portable/).
#
# The sources: the sdist's llama.cpp with deploy/llama-cpp/patches/*.patch applied, which
# give the batch-invariant mode (LLM_BATCH_INVARIANT) fast kernels whose sums do not depend
# on how many rows are computed together (each patch says what it changes and why;
# docs/performance/kernels.md measures them). LLAMA_PATCHES=0 builds the sdist as it is.
set -euo pipefail
cd "$(dirname "$0")/../.."

portable="${LLAMA_PORTABLE:-0}"
if [ "$portable" = 1 ]; then
  # Every CPU variant llama.cpp knows, each a module; the server loads the best at start-up
  # (app/engine/backends.py). patches/portable/no-amx-variant.patch leaves out the AMX one.
  args="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON"
else
  args="-DGGML_NATIVE=ON"
  if [ "$(uname -m)" = x86_64 ]; then
    no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    args="$args '-DCMAKE_C_FLAGS=$no_amx' '-DCMAKE_CXX_FLAGS=$no_amx'"
  fi
fi
args="$args${LLAMA_CMAKE_ARGS:+ $LLAMA_CMAKE_ARGS}"
if [ "${1:-}" = --cmake-args ]; then
  echo "$args"
  exit 0
fi

python="${1:?usage: wheel.sh PYTHON | --cmake-args}"
version="$(sed -n 's/^llama_cpp_python==//p' requirements.txt)"
patches=()
if [ "${LLAMA_PATCHES:-1}" != 0 ]; then
  patches=(deploy/llama-cpp/patches/*.patch)
  if [ "$portable" = 1 ]; then  # those that matter only to a build of every variant, too
    patches+=(deploy/llama-cpp/patches/portable/*.patch)
  fi
  if [[ "$args" == *-DGGML_VULKAN=ON* ]]; then  # and those of the Vulkan backend's build
    patches+=(deploy/llama-cpp/patches/vulkan/*.patch)
  fi
  # applied in the order of their names, wherever they are
  mapfile -t patches < <(for patch in "${patches[@]}"; do printf '%s\t%s\n' "${patch##*/}" "$patch"; done \
    | sort | cut -f2)
fi
key="$(printf '%s|%s|%s|%s' "$version" "$args" "$("$python" -c 'import sys; print(sys.version_info[:2])')" \
  "$(cat /dev/null "${patches[@]}" | sha256sum)" | sha256sum | cut -c1-16)"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/llm-server/wheels/$key"
if ! compgen -G "$dir/llama_cpp_python-$version-*.whl" >/dev/null; then
  minutes=7; [ "$portable" = 1 ] && minutes=10
  echo "building llama-cpp-python $version ($args, ${#patches[@]} patches): about $minutes minutes on 2 cores" >&2
  started=$SECONDS
  rm -rf "$dir.partial" && mkdir -p "$dir.partial/src"
  "$python" -m pip download --quiet --no-deps --no-binary llama_cpp_python \
    "llama_cpp_python==$version" -d "$dir.partial/src" >&2
  tar -xzf "$dir.partial/src/llama_cpp_python-$version.tar.gz" -C "$dir.partial/src"
  source="$dir.partial/src/llama_cpp_python-$version"
  for patch in "${patches[@]}"; do  # git applies them: no other tool than the clone's own
    git -C "$source/vendor/llama.cpp" apply -p1 < "$patch" >&2
  done
  if [ "$portable" = 1 ]; then  # llama-cpp-python installs the one ggml-cpu it knows: these too
    cat >> "$source/CMakeLists.txt" <<'CMAKE'
# (llm-server) each CPU variant a module beside libggml, where the server loads the best from
get_property(ggml_targets DIRECTORY vendor/llama.cpp/ggml/src PROPERTY BUILDSYSTEM_TARGETS)
foreach(target IN LISTS ggml_targets)
    if(target MATCHES "^ggml-cpu-")
        llama_cpp_python_install_target(${target})
    endif()
endforeach()
CMAKE
  fi
  CMAKE_ARGS="$args" "$python" -m pip wheel --quiet --no-cache-dir --no-deps "$source" -w "$dir.partial" >&2
  echo $((SECONDS - started)) > "$dir.partial/build-seconds"  # what building it took (bench.vulkan says)
  rm -rf "$dir.partial/src" "$dir" && mv "$dir.partial" "$dir"
fi
# Beside it, llama.cpp's JSON schema converter from the same sdist (deploy/llama-cpp/json-grammar,
# seconds to compile), made again when its sources here change.
grammar="deploy/llama-cpp/json-grammar"
stamp="$(cd "$grammar" && cat pyproject.toml setup.py converter.cpp fetch-source.sh llm_json_grammar/* \
  | sha256sum | cut -c1-16)"
if [ "$(cat "$dir/llm_json_grammar.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "building llm-json-grammar $version (llama.cpp's JSON schema converter): about a minute" >&2
  rm -f "$dir"/llm_json_grammar-*.whl
  sources="$(mktemp -d)"
  LLAMA_CPP_SOURCE="$(bash "$grammar/fetch-source.sh" "$python" "$version" "$sources")" \
    "$python" -m pip wheel --quiet --no-cache-dir --no-deps "./$grammar" -w "$dir" >&2
  rm -rf "$sources" "$grammar/upstream" "$grammar/build" "$grammar"/*.egg-info
  echo "$stamp" > "$dir/llm_json_grammar.stamp"
fi
echo "$dir"
