"""What a trace says about the model behind a run: its name, provider and server address.

Read from the transport's public attributes (``model`` and ``base_url`` of an HTTP model,
``model_path`` of the embedded one); a transport with neither is named by its class. An agent
on Temporal has no model of its own (its workers have it): its name and provider are "",
unknown here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["ModelInfo", "describe_model"]


@dataclass(frozen=True, kw_only=True)
class ModelInfo:
    """How traces name a model (``gen_ai.request.model``, ``gen_ai.provider.name``, ...)."""

    name: str
    provider: str
    server_address: str | None = None
    server_port: int | None = None


def describe_model(model: object) -> ModelInfo:
    """The :class:`ModelInfo` of a model transport.

    Example:
        >>> from miniagent import ScriptedModel
        >>> describe_model(ScriptedModel(["Final Answer: 1"])).name
        'ScriptedModel'
    """
    if model is None:  # a Temporal agent's client: the workers have the model
        return ModelInfo(name="", provider="")
    base_url = getattr(model, "base_url", None)
    name = getattr(model, "model", None)
    if isinstance(base_url, str) and isinstance(name, str):
        parts = urlsplit(base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        # an OpenAI-compatible API: the conventions name the API's family, not the vendor
        return ModelInfo(name=name, provider="openai", server_address=parts.hostname,
                         server_port=port)
    path = getattr(model, "model_path", None)
    if isinstance(path, (str, Path)):
        return ModelInfo(name=Path(path).name, provider="llama.cpp")
    return ModelInfo(name=type(model).__name__, provider="miniagent")
