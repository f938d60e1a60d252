"""The machine a report names (`memoryd.platform.host`)."""

from __future__ import annotations

from memoryd.platform.host import KERNEL_FLAGS, machine_info


def test_the_machine_names_its_cores_and_the_kernel_flags_it_has() -> None:
    info = machine_info()
    assert info["nproc"] >= 1 and info["python"].count(".") == 2
    assert set(info["cpu_features"]) <= set(KERNEL_FLAGS)
    # /proc/cpuinfo is read on Linux: its flags line names avx2 on every x86-64 host this
    # runs on, so an empty list there would mean the line was not read.
    text = open("/proc/cpuinfo").read()
    if " avx2" in text:
        assert "avx2" in info["cpu_features"]
