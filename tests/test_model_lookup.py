"""What a model argument means: a missing path is a missing file (never a network call), and
a Hub id fails fast offline with a message that names it and says to pass a config.json."""

from __future__ import annotations

import sys
import threading
import time
import types

import pytest

from roofline.errors import RooflineError
from roofline.models import load_model
from roofline.models.catalog import HUB_TIMEOUT_S


@pytest.fixture
def hub(monkeypatch):
    """A stand-in huggingface_hub whose download does what the test says; records calls."""
    calls = []
    module = types.ModuleType("huggingface_hub")

    def install(download):
        def hf_hub_download(repo, filename, **kwargs):
            calls.append((repo, filename, kwargs))
            if kwargs.get("local_files_only"):
                raise FileNotFoundError("not in the cache")
            return download(repo, filename)

        module.hf_hub_download = hf_hub_download  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "huggingface_hub", module)
        # the Hub's host answers: the download stand-in decides what happens
        monkeypatch.setattr("roofline.models.catalog._offline", lambda: "")
        return calls

    return install


@pytest.mark.parametrize("text", ["a/b/c", "./x.json", "../models/x", "~/llama/config.json",
                                  "org/name.json", "/abs/config.json"])
def test_a_missing_path_is_a_missing_file_not_a_hub_request(hub, text):
    calls = hub(lambda repo, filename: pytest.fail("the network was asked"))
    with pytest.raises(RooflineError, match=f"model config not found: {text}"):
        load_model(text)
    assert calls == []


def test_offline_hub_id_fails_within_two_seconds(hub):
    release = threading.Event()

    def hangs(repo, filename):  # a DNS lookup or connection that never answers
        release.wait(30)
        raise OSError("gave up")

    hub(hangs)
    start = time.perf_counter()
    try:
        with pytest.raises(RooflineError) as info:
            load_model("meta-llama/Llama-3.1-8B")
    finally:
        release.set()
    assert time.perf_counter() - start < 2.0 and HUB_TIMEOUT_S < 2.0
    message = str(info.value)
    assert "meta-llama/Llama-3.1-8B" in message and "local config.json" in message
    assert "offline?" in message


def test_hub_errors_name_the_id_and_the_fix(hub):
    def refused(repo, filename):
        raise ConnectionError("connection refused")

    calls = hub(refused)
    with pytest.raises(RooflineError, match=r"could not fetch org/model/config.json .*"
                       r"\(ConnectionError\); download https://huggingface.co/org/model/"
                       r"resolve/main/config.json and pass the local config.json"):
        load_model("org/model")
    assert [c[2].get("local_files_only", False) for c in calls] == [True, False]  # cache first


def test_hub_config_is_read_like_a_local_one(hub, tmp_path):
    from roofline.models.catalog import CATALOG_DIR

    path = tmp_path / "config.json"
    path.write_text((CATALOG_DIR / "llama-3-8b.json").read_text())
    hub(lambda repo, filename: str(path))
    spec = load_model("someone/llama-copy")
    assert spec.name == "llama-copy" and spec.layers == 32


def test_without_huggingface_hub_the_message_says_what_to_download(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    with pytest.raises(RooflineError, match=r"'org/model' looks like a Hub id, but "
                       r"huggingface_hub is not installed: download https://huggingface.co/"
                       r"org/model/resolve/main/config.json"):
        load_model("org/model")


def test_cli_names_the_hub_id(run_cli, hub):
    hub(lambda repo, filename: (_ for _ in ()).throw(TimeoutError("slow")))
    code, _, err = run_cli("model", "org/model")
    assert code == 2 and err.count("\n") == 1 and "org/model" in err
