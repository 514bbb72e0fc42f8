"""`roofline hw export ID` and `roofline model export ID`: files to start your own from, which
load back as the catalog entry they came from."""

from dataclasses import replace

import pytest

from roofline.hardware import list_chips, load_chip
from roofline.models import list_models, load_model


@pytest.mark.parametrize("chip", list_chips())
def test_hw_export_loads_back_as_the_catalog_chip(run_cli, tmp_path, chip):
    code, out, err = run_cli("hw", "export", chip)
    assert code == 0 and not err
    path = tmp_path / "mine.toml"
    path.write_text(out)
    exported, catalog = load_chip(str(path)), load_chip(chip)
    assert replace(exported, origin="") == replace(catalog, origin="")


def test_hw_export_by_alias_and_the_file_is_usable_with_hw(run_cli, tmp_path):
    code, out, _ = run_cli("hw", "export", "h100")
    path = tmp_path / "my-h100.toml"
    path.write_text(out)
    code, shown, _ = run_cli("op", "matmul", "--m", "128", "--k", "8192", "--n", "8192",
                             "--hw", str(path))
    assert code == 0 and "h100-sxm" in shown


@pytest.mark.parametrize("model", list_models())
def test_model_export_loads_back_as_the_catalog_model(run_cli, tmp_path, model):
    code, out, err = run_cli("model", "export", model)
    assert code == 0 and not err
    (tmp_path / "config.json").write_text(out)
    exported, catalog = load_model(str(tmp_path)), load_model(model)
    assert replace(exported, name=model) == catalog


@pytest.mark.parametrize(("argv", "needle"), [
    (("hw", "export", "h1000"), "unknown chip 'h1000'"),
    (("model", "export", "llama-5"), "unknown model 'llama-5'"),
    (("model", "export"), "a second name is only for 'roofline model export ID'"),
    (("model", "llama-3-8b", "gpt2"), "a second name is only for 'roofline model export ID'"),
])
def test_export_errors_are_one_line(run_cli, argv, needle):
    code, out, err = run_cli(*argv)
    assert code == 2 and not out and needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
