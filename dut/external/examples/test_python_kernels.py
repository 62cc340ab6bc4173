"""The Python example kernels under pytest, one test per ci.yaml scenario (harness/python/README.md):

    PYTHONPATH=build/python pytest -p swa_harness.pytest_plugin dut/external/examples/test_python_kernels.py

SWA_KERNEL_FAULT=NAME runs the kernels' faulty variant of that name instead (numpy_kernel.py: window-plus-one,
ring-slot-late; torch_kernel.py: repeat-not-interleave, p-fp16), whose failures print the
commands that reproduce and diagnose them with the same kernel.
"""
import functools
import os

import numpy_kernel
import torch_kernel

import swa_harness

FAULT = os.environ.get("SWA_KERNEL_FAULT")
CI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scenarios", "ci.yaml")


def kernel(function, faults):
    return functools.partial(function, fault=FAULT) if FAULT in faults else function


@swa_harness.sweep(CI)
def test_numpy_kernel(scenario, swa_check):
    swa_check(scenario, kernel(numpy_kernel.attention, numpy_kernel.FAULTS))


@swa_harness.sweep(CI, sweep="feature_pairs")
def test_torch_kernel(scenario, swa_check):
    swa_check(scenario, kernel(torch_kernel.attention, torch_kernel.FAULTS))
