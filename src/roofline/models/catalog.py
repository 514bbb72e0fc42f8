"""Find a model config: an embedded catalog id, a config.json path, a model directory, or a
Hugging Face Hub id (only when huggingface_hub is installed and the Hub is reachable; only the
config.json is fetched, never weights, never remote code)."""

from __future__ import annotations

import re
import threading
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import RooflineError, unknown
from ..files import read_json
from .hf_config import parse_config
from .spec import ModelSpec

CATALOG_DIR = Path(__file__).with_name("catalog")


def list_models() -> list[str]:
    """Ids of the embedded model configs."""
    return list(_catalog_ids())


@cache
def _catalog_ids() -> tuple[str, ...]:
    # listed once per process: a directory scan per analyze cost more than the analysis
    return tuple(sorted(p.stem for p in CATALOG_DIR.glob("*.json")))


@cache
def _catalog_model(name: str) -> ModelSpec:
    path = CATALOG_DIR / f"{name}.json"
    return parse_config(read_json(path), name, str(path))


# owner/name as the Hub spells it; anything else with a slash is a path
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
HUB_TIMEOUT_S = 1.5  # offline, a Hub id must fail fast, not after the library's retries


def load_model(name: str | ModelSpec) -> ModelSpec:
    """A ModelSpec from a catalog id, a config.json, a directory holding one, or a Hub id."""
    if isinstance(name, ModelSpec):
        return name
    text = str(name).strip()
    if text.lower() in _catalog_ids():
        return _catalog_model(text.lower())
    path = Path(text)
    try:
        if path.is_dir():
            path = path / "config.json"
            if not path.is_file():
                raise RooflineError(f"{text}: no config.json in this directory")
        found = path.exists() or path.is_symlink()
    except OSError as exc:  # a name too long, a loop of links
        raise RooflineError(f"{text}: cannot read: {exc.strerror or exc}") from None
    if found:  # read_json refuses a directory, a device or a FIFO with its own message
        return parse_config(read_json(path, "config.json"),
                            path.parent.name if path.name == "config.json" else path.stem,
                            str(path))
    if _HUB_ID.fullmatch(text) and not text.endswith(".json"):
        return _from_hub(text)
    if "/" in text or "\\" in text or text.endswith(".json") or text.startswith((".", "~")):
        raise RooflineError(f"model config not found: {text} (no such file; a Hub id is "
                            "owner/name)")
    raise unknown("model", text, list_models())


def _from_hub(repo: str) -> ModelSpec:
    hint = (f"download https://huggingface.co/{repo}/resolve/main/config.json and pass the "
            "local config.json")
    try:
        from huggingface_hub import hf_hub_download  # optional; only the config is fetched
    except ImportError:
        raise RooflineError(f"{repo!r} looks like a Hub id, but huggingface_hub is not "
                            f"installed: {hint}") from None
    try:  # a cached copy needs no network
        path = hf_hub_download(repo, "config.json", local_files_only=True)
    except Exception:
        offline = _offline()
        if offline:  # asked once, not through the library's retries (a line each)
            raise RooflineError(f"could not fetch {repo}/config.json from the Hugging Face "
                                f"Hub ({offline}); {hint}") from None
        path = _fetch(repo, hf_hub_download, hint)
    return parse_config(read_json(Path(path), "config.json"), repo.split("/")[-1],
                        f"{repo}/config.json")


def _offline() -> str:
    """Why the Hub cannot be reached ('' if it can): HF_HUB_OFFLINE, or one connection to
    its host (HF_ENDPOINT's) that fails or does not answer within a second."""
    import os
    import socket
    from urllib.parse import urlsplit

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http"
                                                                else 443)
    why: list[str] = ["no answer within 1 s: offline?"]

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=1.0).close()
            why[0] = ""
        except OSError as exc:
            why[0] = f"{host} unreachable: {exc.strerror or exc}; offline?"

    worker = threading.Thread(target=connect, name="hub check", daemon=True)
    worker.start()
    worker.join(1.0)  # a name lookup has no timeout of its own: the thread is abandoned
    return why[0]


def _fetch(repo: str, download: Any, hint: str) -> str:
    """The downloaded config's path, or a RooflineError within HUB_TIMEOUT_S: the download
    runs in a daemon thread that is abandoned if the Hub does not answer in time."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["path"] = download(repo, "config.json", etag_timeout=HUB_TIMEOUT_S)
        except Exception as exc:  # network, auth, missing repo: all mean "pass a local file"
            result["error"] = exc

    worker = threading.Thread(target=run, name=f"hub {repo}", daemon=True)
    worker.start()
    worker.join(HUB_TIMEOUT_S)
    if "path" in result:
        return str(result["path"])
    why = (f"{type(result['error']).__name__}" if "error" in result
           else f"no answer within {HUB_TIMEOUT_S:g} s: offline?")
    raise RooflineError(f"could not fetch {repo}/config.json from the Hugging Face Hub ({why});"
                        f" {hint}")
