"""``ra --otel``: OpenTelemetry traces of the run, configured by the standard ``OTEL_*`` variables.

Under ``opentelemetry-instrument`` (or any host that set a global SDK tracer provider) the spans go
to that provider. Otherwise ra sets one up the way the SDK's own auto-configuration does, from
the environment: the exporters ``OTEL_TRACES_EXPORTER`` names (default ``otlp``; ``console``
prints them; each is looked up by its ``opentelemetry_traces_exporter`` entry point, so its
package must be installed), the resource from ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``
(service name "ra" when neither names one), and each exporter's own variables (endpoint,
headers). ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` also records prompts,
answers and tool arguments and results (secrets redacted), as other GenAI instrumentations do.
Nothing here is imported without ``--otel``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .config import ConfigError

__all__ = ["CONTENT_VARIABLE", "cli_tracing"]

#: The variable the OpenTelemetry GenAI instrumentations read to record message content.
CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

_SDK_MISSING = (
    "--otel needs the OpenTelemetry SDK: pip install opentelemetry-sdk (and the exporter's package, "
    "e.g. opentelemetry-exporter-otlp; OTEL_TRACES_EXPORTER=console needs none)"
)


def cli_tracing(environ: Mapping[str, str]) -> tuple[Any, Callable[[], Any]]:
    """The run's :class:`~ra.agent.tracing.Tracing` and the function that sends the spans still
    buffered at the end of the run. Raises ConfigError naming what is missing or wrong."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError as exc:
        raise ConfigError(_SDK_MISSING) from exc
    from ra.agent.tracing import Tracing

    content = _flag(environ, CONTENT_VARIABLE)
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):  # opentelemetry-instrument, or a host, configured it
        return Tracing(current, capture_content=content), current.force_flush
    provider = _provider(environ)
    return Tracing(provider, capture_content=content), provider.shutdown


def _provider(environ: Mapping[str, str]) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    named = environ.get("OTEL_SERVICE_NAME") or "service.name=" in environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": "ra"}))
    for exporter in _exporters(environ):
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporters(environ: Mapping[str, str]) -> list[Any]:
    from importlib.metadata import entry_points

    names = [n.strip() for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    if names == ["none"]:
        return []
    found = {ep.name: ep for ep in entry_points(group="opentelemetry_traces_exporter")}
    exporters = []
    for name in names:
        entry = found.get(name)
        if entry is None:
            known = ", ".join(sorted(found)) or "none"
            hint = " (pip install opentelemetry-exporter-otlp)" if name.startswith("otlp") else ""
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER names {name!r}, which is not installed{hint}; installed: {known}, or none"
            )
        try:
            exporters.append(entry.load()())
        except Exception as exc:
            raise ConfigError(f"the {name!r} trace exporter could not start: {exc}") from exc
    return exporters


def _flag(environ: Mapping[str, str], name: str) -> bool:
    value = environ.get(name, "").strip().lower()
    if value in ("", "false", "0", "no"):
        return False
    if value in ("true", "1", "yes"):
        return True
    raise ConfigError(f"{name} is true or false, got {environ[name]!r}")
