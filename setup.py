"""The swa_harness wheel, built with CMake (pyproject.toml; README.md, "Install").

The build step uses the CMake build folder SWA_BUILD_DIR when set, else build/ when it is configured,
else configures its own in build-pip/cmake (SWA_CMAKE_ARGS adds options, e.g. -DSWA_ENABLE_CUDA=OFF;
SWA_PIP_BUILD_DIR moves build-pip/, where setuptools' own build folders go too).
It builds the command line and the Python module there, installs the runtime and python components
(CMakeLists.txt, "Installing") into a staging folder and lays them out as the package:

    swa_harness/            __init__.py, pytest_plugin.py, _cli.py, _dut_glue.py, _core*.so, _paths.py
    swa_harness/bin/        swa-harness (what the console script execs; _paths.HARNESS)
    swa_harness/libexec/swa-harness/   the plugin worker, the HDF5 probe, the python: DUT
    swa_harness/share/swa-harness/     scenarios/, reports/
    swa_harness/lib/swa-harness/       the CUDA DUT's shared library, when it was built

the same folders as an installed prefix, so the binary finds its helpers the same way
(platform/include/swa/platform/install_layout.hpp).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))
PIP_BUILD = os.path.abspath(os.environ.get("SWA_PIP_BUILD_DIR") or os.path.join(ROOT, "build-pip"))
TARGETS = ["swa-harness", "swa_harness_python", "swa-dut-worker", "swa-h5-probe", "swa_python_dut"]
PACKAGE_SOURCE = os.path.join("harness", "python", "swa_harness")


def fail(message):
    sys.stderr.write(f"swa_harness setup.py: error: {message}\n")
    sys.exit(2)


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        match = re.search(r"project\(\s*swa_harness\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", f.read())
    if not match:
        fail("CMakeLists.txt has no project(swa_harness VERSION X.Y.Z)")
    return match.group(1)


def cache_value(build_dir, name):
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def run(args):
    print("swa_harness setup.py:", shlex.join(args), flush=True)
    result = subprocess.run(args)
    if result.returncode != 0:
        fail(f"{shlex.join(args)} exited with status {result.returncode}")


def cmake_build_dir():
    """The configured build folder to use, configuring one when there is none."""
    given = os.environ.get("SWA_BUILD_DIR")
    build_dir = os.path.abspath(given) if given else os.path.join(ROOT, "build")
    if not given and not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
        build_dir = os.path.join(PIP_BUILD, "cmake")
    if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
        if os.path.exists(build_dir) and not os.path.isdir(build_dir):
            fail(f"the build folder {build_dir} (SWA_BUILD_DIR) is not a folder")
        if os.path.isdir(build_dir) and os.listdir(build_dir):
            fail(f"the build folder {build_dir} is not a CMake build folder (no CMakeCache.txt) and not empty: "
                 "empty it, or set SWA_BUILD_DIR to a configured one")
        extra = shlex.split(os.environ.get("SWA_CMAKE_ARGS", ""))
        run(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
             f"-DPython3_EXECUTABLE={python_for_cmake()}", *extra])
    source = cache_value(build_dir, "CMAKE_HOME_DIRECTORY")
    if source and os.path.realpath(source) != os.path.realpath(ROOT):
        fail(f"the build folder {build_dir} is configured for {source}, not {ROOT} (set SWA_BUILD_DIR)")
    python = cache_value(build_dir, "Python3_EXECUTABLE")
    if python and python_version(python) != python_version(sys.executable):
        fail(f"the build folder {build_dir} builds the module for {python} (Python {python_version(python)}), "
             f"but this install runs Python {python_version(sys.executable)}: use that Python's venv, "
             "or set SWA_BUILD_DIR to a build configured with -DPython3_EXECUTABLE=" + sys.executable)
    return build_dir


def python_for_cmake():
    # A venv's python is a link to the base interpreter; CMake wants the base (its headers, its libpython).
    return getattr(sys, "_base_executable", None) or sys.executable


def python_version(python):
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


class BinaryDistribution(Distribution):
    """A wheel for this platform and Python: it holds a compiled module and binaries."""

    def has_ext_modules(self):
        return True


class BuildWithCMake(build_py):
    def run(self):
        super().run()
        build_dir = cmake_build_dir()
        jobs = os.environ.get("SWA_BUILD_JOBS") or str(os.cpu_count() or 2)
        run(["cmake", "--build", build_dir, "-j", jobs, "--target", *TARGETS])
        package = os.path.join(self.build_lib, "swa_harness")
        with tempfile.TemporaryDirectory(prefix="swa-wheel-stage-") as stage:
            for component in ("runtime", "python"):
                run(["cmake", "--install", build_dir, "--prefix", stage, "--component", component])
            python_dir = cache_value(build_dir, "SWA_INSTALL_PYTHONDIR") or "lib/python3/dist-packages"
            staged_package = os.path.join(stage, python_dir, "swa_harness")
            if not os.path.isdir(staged_package):
                fail(f"cmake --install put no Python package in {staged_package}")
            for name in os.listdir(staged_package):
                if name != "_paths.py":
                    shutil.copy2(os.path.join(staged_package, name), os.path.join(package, name))
            for folder in ("bin", "libexec", "share", os.path.join("lib", "swa-harness")):
                target = os.path.join(package, folder)
                shutil.rmtree(target, ignore_errors=True)
                if os.path.isdir(os.path.join(stage, folder)):  # lib/swa-harness: only with the CUDA DUT
                    shutil.copytree(os.path.join(stage, folder), target, symlinks=False)
        with open(os.path.join(package, "_paths.py"), "w", encoding="utf-8") as f:
            f.write("# Written by setup.py for the wheel: the command line installed inside this package.\n"
                    "import os\n\n"
                    "HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), \"bin\", \"swa-harness\")\n")


os.makedirs(PIP_BUILD, exist_ok=True)
setup(
    version=project_version(),
    packages=["swa_harness"],
    package_dir={"swa_harness": PACKAGE_SOURCE},
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildWithCMake},
    zip_safe=False,
    options={"build": {"build_base": os.path.join(PIP_BUILD, "setuptools")}, "egg_info": {"egg_base": PIP_BUILD}},
)
