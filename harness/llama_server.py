"""llama.cpp's own C++ server, built from the llama.cpp that the pinned llama-cpp-python vendors.

Built once into a cache outside the repository (`~/.cache/llm-server-bench`, or
`$LLM_BENCH_CACHE`): the sdist comes from PyPI, nothing else from the network. The
same sources as ours, so the comparison is of the serving loops, not of two
llama.cpp versions.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from harness.servers import Service, free_port

CACHE = Path(os.environ.get("LLM_BENCH_CACHE", Path.home() / ".cache" / "llm-server-bench"))
# Each build this process started, described, for a benchmark's result file (bench/provenance.py).
BUILDS: dict[str, str] = {}
# Only the server: no tests, examples, web UI download or TLS, so the build needs no network.
CMAKE_OPTIONS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_APP=OFF",
]


def cpu_options() -> list[str]:
    """The CPU options our own llama-cpp-python wheel is built with (deploy/llama-cpp/wheel.sh): no AMX."""
    script = Path(__file__).resolve().parents[1] / "deploy" / "llama-cpp" / "wheel.sh"
    printed = subprocess.run(
        ["bash", str(script), "--cmake-args"], check=True, capture_output=True, text=True
    )
    return shlex.split(printed.stdout)


def sdist(folder: Path) -> Path:
    """The pinned llama-cpp-python's source archive (llama.cpp inside), fetched into `folder` by pip."""
    version = importlib.metadata.version("llama_cpp_python")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
         "--dest", str(folder), f"llama_cpp_python=={version}"],
        check=True,
    )  # fmt: skip
    (archive,) = folder.glob("llama_cpp_python-*.tar.gz")
    return archive


def stock_options() -> list[str]:
    """A stock build's CPU options: upstream's defaults (native, llamafile's sgemm), less only AMX on
    x86, whose matmul crashes on the first prompt of more than one token on Sapphire Rapids machines
    (deploy/llama-cpp/wheel.sh says which issue): what a user who builds llama-server runs."""
    if os.uname().machine != "x86_64":
        return []
    no_amx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    return [f"-DCMAKE_C_FLAGS={no_amx}", f"-DCMAKE_CXX_FLAGS={no_amx}"]


PATCHES = sorted((Path(__file__).resolve().parents[1] / "deploy" / "llama-cpp" / "patches").glob("*.patch"))


def binary(stock: bool = False) -> Path:
    """The llama-server executable, built on first use (about ten minutes on two cores): with our
    wheel's CPU options and patches (to compare answers), or `stock` (to compare speed with what
    users run: upstream's sources as the sdist has them)."""
    version = importlib.metadata.version("llama_cpp_python")
    # Named by the CPU options and patches too: a build with other kernels (AMX, llamafile's sgemm
    # unpatched) computes other numbers than our wheel, and the tests compare answers bit for bit.
    chosen = stock_options() if stock else cpu_options()
    patches = [] if stock else PATCHES
    key = " ".join(chosen) + "".join(p.read_text() for p in patches)
    options = hashlib.sha256(key.encode()).hexdigest()[:12]
    build = CACHE / f"build-{version}-{'stock-' if stock else ''}{options}"
    built = build / "bin" / "llama-server"  # beside the shared libraries it links to
    if built.exists():
        return built
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as work:
        with tarfile.open(sdist(Path(work))) as archive:
            archive.extractall(work, filter="data")
        (source,) = Path(work).glob("*/vendor/llama.cpp")
        for patch in patches:
            subprocess.run(["git", "apply", "-p1", str(patch)], cwd=source, check=True)
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_OPTIONS, *chosen], check=True)
        subprocess.run(
            ["cmake", "--build", str(build), "--target", "llama-server", "-j", str(os.cpu_count() or 1)],
            check=True,
        )
    return built


def build_option(parser: argparse.ArgumentParser) -> None:
    """`--llama-server`: the stock build (the default: speed targets are against it) or the tests'
    build (`make reference-server` builds it before the smoke runs, which make no speed claim)."""
    parser.add_argument(
        "--llama-server", choices=("stock", "tests"), default="stock",
        help="which llama-server to compare with: as users build it, or the tests' build (no speed claim)",
    )  # fmt: skip


def named(stock: bool) -> Path:
    """`binary(stock)`, its build named in BUILDS: what the run's record says it compared with."""
    BUILDS[describe(stock)] = " ".join([*CMAKE_OPTIONS, *(stock_options() if stock else cpu_options())])
    return binary(stock)


def describe(stock: bool) -> str:
    """The build in words: whose options and patches, from which sources."""
    version = importlib.metadata.version("llama_cpp_python")
    if stock:
        return f"llama-server, stock build (llama-cpp-python {version}'s sdist, upstream's options less AMX)"
    names = ", ".join(p.stem for p in PATCHES) or "none"
    return f"llama-server, our wheel's options (llama-cpp-python {version}'s sdist, patches: {names})"


# The kernels ours runs in its reproducible mode, LLM_BATCH_INVARIANT=1 (app/engine/model.py):
# llama-server given them answers bit for bit as ours does in that mode; without them it runs
# llama.cpp's fastest, as ours does by default.
SAME_KERNELS = ("--flash-attn", "off", "--no-repack")


def start(
    model_path: str,
    threads: int,
    slots: int,
    n_ctx: int,
    extra: tuple[str, ...] = (),
    same_kernels: bool = False,
    environment: dict[str, str] | None = None,
    stock: bool = False,
) -> Service:
    """llama-server with `slots` slots of `n_ctx` tokens each (as ours: a whole context per sequence);
    `same_kernels`: with the batch-invariant kernels of ours' reproducible mode, to compare answers;
    `stock`: the build users run (stock_options), to compare speed."""
    port = free_port()
    command = [
        str(named(stock)),
        "--model", model_path,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--threads", str(threads),
        "--threads-batch", str(threads),
        "--parallel", str(slots),
        "--ctx-size", str(slots * n_ctx),
        "--no-webui",
        *(SAME_KERNELS if same_kernels else ()),
        *extra,
    ]  # fmt: skip
    env = {"GGML_CPU_TILED_MM": "0"} if same_kernels else {}
    return Service(command, port, {**env, **(environment or {})}).wait_ready("/health")
