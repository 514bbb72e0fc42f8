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


@pytest.mark.parametrize(("text", "hint", "decimal", "binary"), [
    ("64M", "write 64MB (= 64e6) or 64MiB (= 64·2^20)", "64MB", "64MiB"),
    ("1.5G", "write 1.5GB (= 1.5e9) or 1.5GiB (= 1.5·2^30)", "1.5GB", "1.5GiB"),
    ("2k", "write 2KB (= 2e3) or 2KiB (= 2·2^10)", "2KB", "2KiB"),
    ("3P", "write 3PB (= 3e15)", "3PB", None),  # no PiB in the table: not offered
])
def test_parse_bytes_refuses_a_bare_decimal_prefix(text, hint, decimal, binary):
    # the count '4M' means 4·2**20, so a byte size's '64M' silently meaning 64e6 misled
    with pytest.raises(RooflineError) as info:
        parse_bytes(text, "--bytes")
    assert str(info.value) == f"--bytes: '{text}' is ambiguous for a byte size; {hint}"
    for suggestion in (decimal, binary):  # both suggestions parse
        assert suggestion is None or parse_bytes(suggestion) > 0
    assert parse_bytes("64Mi") == 2**26  # a binary prefix says which it means


def test_cli_refuses_a_bare_suffix_for_bytes(run_cli):
    code, _, err = run_cli("op", "allreduce", "--bytes", "64M", "--ranks", "8")
    assert code == 2 and "ambiguous for a byte size; write 64MB" in err
    assert err.count("\n") == 1


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
