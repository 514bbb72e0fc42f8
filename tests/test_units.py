import pytest

from roofline.errors import RooflineError
from roofline.units import format_bytes, format_si, format_time, parse_bytes, parse_count


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4096", 4096), ("64KiB", 65536), ("16MB", 16e6), ("1.5GiB", 1.5 * 2**30), ("2e9", 2e9),
     ("8 GiB", 8 * 2**30), ("1kB", 1000), ("3TB", 3e12), ("1MiB", 2**20)],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "abc", "-5", "0", "12Xi", "5Mb", "1e"])
def test_parse_bytes_rejects(text):
    with pytest.raises(RooflineError, match="size"):
        parse_bytes(text, "size")


@pytest.mark.parametrize(("text", "expected"), [("8192", 8192), ("1e6", 1_000_000), (" 7 ", 7),
                                               ("8k", 8192), ("2M", 2 * 1024**2)])
def test_parse_count(text, expected):
    assert parse_count(text) == expected


@pytest.mark.parametrize("text", ["0", "-1", "1.5", "abc", "inf", "nan", "", "1e300", "8kB"])
def test_parse_count_rejects(text):
    with pytest.raises(RooflineError, match="--m: expected a positive whole number"):
        parse_count(text, "--m")


def test_format():
    assert format_si(9.894e14, "FLOP/s") == "989 TFLOP/s"
    assert format_bytes(80e9) == "80 GB"
    assert format_time(1.0107e-3) == "1.01 ms"
    assert format_time(4.2e-6) == "4.2 us"
    assert format_time(0.0) == "0 s"
    assert format_si(0.5) == "0.5"
