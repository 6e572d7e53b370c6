"""Builds the Python module pfx through CMake: only the module's target (python/CMakeLists.txt),
not the tests, benchmarks, examples, the pfx program or the CUDA backend, so that a build takes
about a minute. Used by `pip install --no-build-isolation .` (pyproject.toml).

CMake installs the extension and the files of python/pfx/ (stubs and py.typed included) into the
wheel's folder with `cmake --install --component python`. Environment: CMAKE_CXX_COMPILER_LAUNCHER
(ccache) is passed on to CMake; PFX_CMAKE_BUILD_DIR chooses CMake's build folder (default: under
build/pip/, which the repository ignores).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
SCRATCH = os.path.join(ROOT, "build", "pip")  # setuptools' and CMake's folders: never the source tree


def version() -> str:
    """The project's version, from the top-level CMakeLists.txt (one place)."""
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as cmake:
        found = re.search(r"project\(pfx\s+VERSION\s+([0-9.]+)", cmake.read())
    if found is None:
        raise RuntimeError("no `project(pfx VERSION x.y.z)` in CMakeLists.txt")
    return found.group(1)


class CMakeBuild(build_ext):
    """Configures, builds and installs the target pfx_python for the interpreter running pip."""

    def build_extension(self, ext: Extension) -> None:
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name))))
        build_dir = os.environ.get("PFX_CMAKE_BUILD_DIR") or os.path.join(
            SCRATCH, f"cmake-{sys.implementation.cache_tag}")
        configure = [
            "cmake", "-S", ROOT, "-B", build_dir,
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DPFX_PYTHON_INSTALL_DIR={package_root}",
            "-DPFX_BUILD_PYTHON=ON",
            "-DPFX_BUILD_TESTS=OFF", "-DPFX_BUILD_BENCHMARKS=OFF", "-DPFX_BUILD_EXAMPLES=OFF",
            "-DPFX_BUILD_CLI=OFF", "-DPFX_BUILD_DRIVER=OFF", "-DPFX_CUDA=OFF", "-DPFX_INSTALL=OFF",
            "-DPFX_WARNINGS_AS_ERRORS=OFF",
        ]
        jobs = str(max(1, min(os.cpu_count() or 1, 4)))
        for command in (configure,
                        ["cmake", "--build", build_dir, "--target", "pfx_python", "-j", jobs],
                        ["cmake", "--install", build_dir, "--component", "python"]):
            print(" ".join(command), flush=True)
            subprocess.run(command, check=True)


os.makedirs(SCRATCH, exist_ok=True)
setup(
    version=version(),
    packages=["pfx", "pfx.integrations"],
    package_dir={"": "python"},
    package_data={"pfx": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("pfx._native", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": SCRATCH}, "egg_info": {"egg_base": SCRATCH}},
    zip_safe=False,
)
