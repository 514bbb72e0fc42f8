import pytest

from roofline import RooflineError, dtype
from roofline.dtypes import dtype_names


@pytest.mark.parametrize(
    ("name", "nbytes"),
    [("fp64", 8), ("fp32", 4), ("tf32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1), ("int8", 1),
     ("int4", 0.5), ("fp4", 0.5), ("fp6", 0.75), ("bfloat16", 2), ("E4M3", 1), ("nvfp4", 0.5)],
)
def test_bytes_per_element(name, nbytes):
    assert dtype(name).bytes == nbytes


def test_aliases_map_to_canonical_peak():
    assert dtype("float8_e4m3fn").peak == "fp8"
    assert dtype("tf32").peak == "tf32"  # stored as 32 bits, computes at the tf32 peak
    assert dtype("half").name == "fp16"


def test_unknown_dtype_suggests():
    with pytest.raises(RooflineError, match=r"unknown dtype 'bf61'.*did you mean 'bf16'"):
        dtype("bf61")


def test_names_unique():
    assert len(dtype_names()) == len(set(dtype_names()))
