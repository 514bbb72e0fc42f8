"""Find a model config: an embedded catalog id, a config.json path, a model directory, or a
Hugging Face Hub id (only when huggingface_hub is installed and the Hub is reachable; only the
config.json is fetched, never weights, never remote code)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ..errors import RooflineError, unknown
from ..files import read_json
from .spec import ModelSpec, parse_config

CATALOG_DIR = Path(__file__).with_name("catalog")


def list_models() -> list[str]:
    """Ids of the embedded model configs."""
    return sorted(p.stem for p in CATALOG_DIR.glob("*.json"))


@cache
def _catalog_model(name: str) -> ModelSpec:
    path = CATALOG_DIR / f"{name}.json"
    return parse_config(read_json(path), name, str(path))


def load_model(name: str | ModelSpec) -> ModelSpec:
    """A ModelSpec from a catalog id, a config.json, a directory holding one, or a Hub id."""
    if isinstance(name, ModelSpec):
        return name
    text = str(name).strip()
    if text.lower() in list_models():
        return _catalog_model(text.lower())
    path = Path(text)
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise RooflineError(f"{text}: no config.json in this directory")
    if path.is_file():
        return parse_config(read_json(path), path.parent.name if path.name == "config.json"
                            else path.stem, str(path))
    if text.endswith(".json") or text.startswith((".", "/")):
        raise RooflineError(f"model config not found: {text}")
    if "/" in text:
        return _from_hub(text)
    raise unknown("model", text, list_models())


def _from_hub(repo: str) -> ModelSpec:
    try:
        from huggingface_hub import hf_hub_download  # optional; only the config is fetched
    except ImportError:
        raise RooflineError(f"{repo!r} looks like a Hub id, but huggingface_hub is not "
                            "installed: download its config.json and pass the file") from None
    try:
        path = hf_hub_download(repo, "config.json")
    except Exception as exc:  # network, auth, missing repo: all mean "pass a local file"
        raise RooflineError(f"could not fetch {repo}/config.json from the Hub "
                            f"({type(exc).__name__}); pass a local config.json") from None
    return parse_config(read_json(Path(path)), repo.split("/")[-1], f"{repo}/config.json")
