#!/usr/bin/env bash
# Unpacks the parts of llama.cpp the converter needs from the llama-cpp-python sdist of VERSION
# (fetched with PYTHON's pip: PyPI, or wherever pip is pointed) into DEST; prints DEST/llama.cpp.
set -euo pipefail
python="${1:?usage: fetch-source.sh PYTHON VERSION DEST}" version="${2:?}" dest="${3:?}"
mkdir -p "$dest"
"$python" -m pip download --quiet --no-deps --no-binary llama_cpp_python \
  "llama_cpp_python==$version" -d "$dest" >&2
prefix="llama_cpp_python-$version/vendor/llama.cpp"
tar -xzf "$dest/llama_cpp_python-$version.tar.gz" -C "$dest" \
  "$prefix/common" "$prefix/include" "$prefix/ggml/include" "$prefix/vendor/nlohmann"
rm "$dest/llama_cpp_python-$version.tar.gz"
echo "$dest/$prefix"
