import pytest

from roofline import RooflineError, dtype
from roofline.dtypes import dtype_names


@pytest.mark.parametrize(
    ("name", "nbytes"),
    [("fp64", 8), ("fp32", 4), ("tf32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1), ("int8", 1),
     ("int4", 0.5), ("fp4", 0.5), ("fp6", 0.75), ("bfloat16", 2), ("E4M3", 1), ("nvfp4", 0.5625)],
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


@pytest.mark.parametrize(("name", "bits", "peak"), [
    ("int4-g128", 4 + 16 / 128, "int4"),
    ("int4-g32-sbf16", 4 + 16 / 32, "int4"),
    ("int8-g64", 8 + 16 / 64, "int8"),
    ("nvfp4", 4 + 8 / 16, "fp4"),
    ("mxfp4", 4 + 8 / 32, "fp4"),
    ("fp8-g128-sfp32", 8 + 32 / 128, "fp8"),
])
def test_group_quantized_formats_count_their_scales(name, bits, peak):
    d = dtype(name)
    assert d.bits == pytest.approx(bits)
    assert d.peak == peak


@pytest.mark.parametrize(("name", "needle"), [
    ("bf16-g128", "8-bit or narrower"), ("int4-g0", "at least 1"), ("int4-g32-sxyz", "xyz"),
])
def test_bad_group_formats(name, needle):
    with pytest.raises(RooflineError, match=needle):
        dtype(name)


def test_scale_only_types_are_not_compute_types():
    assert "e8m0" not in dtype_names()
