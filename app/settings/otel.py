"""The OpenTelemetry SDK's own variables this server reads: whether to trace, and a transport it has."""

from __future__ import annotations

from collections.abc import Mapping

from app.settings.setting import ConfigError

# The exporter this server ships sends protobuf over HTTP (OTLP's default port 4318).
TRANSPORTS = ("http/protobuf",)


def tracing_wanted(environ: Mapping[str, str]) -> bool:
    """Spans are exported: an OTLP endpoint is set, and neither the SDK nor its traces are off."""
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    disabled = environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    exporters = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    return bool(endpoint) and not disabled and exporters != "none"


def check(environ: Mapping[str, str]) -> None:
    """Refuse a tracing set-up this server cannot export to, naming the variable."""
    if not tracing_wanted(environ):
        return
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = environ.get(name, "").strip()
        if protocol and protocol not in TRANSPORTS:
            raise ConfigError(f"{name}={protocol!r}: this server exports traces over http/protobuf only")
        if protocol:
            break
    exporters = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if exporters != "otlp":
        raise ConfigError(f"OTEL_TRACES_EXPORTER={exporters!r}: this server exports traces to otlp (or none)")
