"""deploy/kubernetes, offline: rendered by kubectl's kustomize, validated, linted, checked for security.

No cluster runs here (no registry for a cluster's images), so what a cluster would refuse
is found the way it would: Kubernetes' schemas and the CRDs' own (tests/support/
manifests.py), yamllint, checkov; plus what no schema sees (sizing, selectors), and our
own settings check over the ConfigMap's LLM_* values.
"""

from __future__ import annotations

import base64
import copy
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.settings.setting import ConfigError
from app.settings.startup import checked_config
from tests.support import manifests
from tests.support.manifests import KUSTOMIZE_ROOT, OVERLAYS, by_kind, problems, render, sizing_problems

pytestmark = pytest.mark.external

CHECKOV = Path(sys.executable).parent.parent / "checkov" / "bin" / "checkov"  # its own venv (Makefile)


@pytest.fixture(scope="module")
def with_components(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An overlay as a user writes one: the gateway overlay plus every component (keys, weights, store)."""
    directory = tmp_path_factory.mktemp("overlay")

    def there(part: str) -> str:  # kustomize takes relative paths only
        return os.path.relpath(KUSTOMIZE_ROOT / part, directory)

    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {there('overlays/inference-gateway')}\n"
        f"components:\n  - {there('components/api-keys')}\n  - {there('components/model-volume')}\n"
        f"  - {there('components/postgres-store')}\n"
    )
    return directory


def overlay_dirs(with_components: Path) -> dict[str, Path]:
    return {**{name: KUSTOMIZE_ROOT / "overlays" / name for name in OVERLAYS}, "components": with_components}


@pytest.mark.parametrize("overlay", [*OVERLAYS, "components"])
def test_every_object_is_valid_for_kubernetes_and_its_crds(overlay: str, with_components: Path) -> None:
    docs = render(overlay_dirs(with_components)[overlay])
    assert not [problem for doc in docs for problem in problems(doc)]
    assert not sizing_problems(docs)
    kinds = set(by_kind(docs))
    assert {"Namespace", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"} <= kinds
    assert {"HorizontalPodAutoscaler", "NetworkPolicy"} <= kinds
    expected = {
        "plain": {"HTTPRoute"},
        "ingress": {"Ingress"},
        "inference-gateway": {"HTTPRoute", "InferencePool"},
    }
    assert expected.get(overlay, {"Secret", "PersistentVolumeClaim", "InferencePool"}) <= kinds


def test_components_mount_the_keys_and_the_weights(with_components: Path) -> None:
    kinds = by_kind(render(with_components))
    settings = kinds["ConfigMap"]["data"]
    assert settings["LLM_API_KEYS_FILE"] == "/etc/llm-server/keys"
    assert settings["LLM_MODEL_PATH"] == "/models/model.gguf"
    mounts = {
        m["mountPath"]
        for m in kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    }
    assert mounts == {"/tmp", "/etc/llm-server", "/models", "/etc/llm-server-store"}
    secrets = by_name(render(with_components), "Secret")
    keys = secrets["llm-server-keys"]
    volumes = kinds["Deployment"]["spec"]["template"]["spec"]["volumes"]
    assert any(v.get("secret", {}).get("secretName") == keys["metadata"]["name"] for v in volumes)


def test_the_store_component_gives_every_pod_one_postgresql(with_components: Path) -> None:
    docs = render(with_components)
    kinds = by_kind(docs)
    assert kinds["ConfigMap"]["data"]["LLM_STORE"] == "on"
    assert kinds["ConfigMap"]["data"]["LLM_STORE_URL_FILE"] == "/etc/llm-server-store/url"
    secret = by_name(docs, "Secret")["llm-server-store"]
    volumes = kinds["Deployment"]["spec"]["template"]["spec"]["volumes"]
    # The generated name, with its hash: a new URL rolls the pods.
    assert any(v.get("secret", {}).get("secretName") == secret["metadata"]["name"] for v in volumes)
    url = base64.b64decode(secret["data"]["url"]).decode().strip()
    assert url.startswith("postgresql://")
    ports = {p["port"] for rule in kinds["NetworkPolicy"]["spec"]["egress"] for p in rule["ports"]}
    assert ports == {5432, 53}  # the database and DNS, nothing else


def by_name(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """The objects of `kind`, by their name before kustomize's hash suffix."""
    return {doc["metadata"]["name"].rsplit("-", 1)[0]: doc for doc in docs if doc["kind"] == kind}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_configmap_passes_the_servers_own_settings_check(
    overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = by_kind(render(KUSTOMIZE_ROOT / "overlays" / overlay))["ConfigMap"]["data"]
    for name in [name for name in os.environ if name.startswith("LLM_")]:
        monkeypatch.delenv(name)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    config = checked_config()
    assert config.workers == int(settings["LLM_WORKERS"]) and config.graceful_timeout == 360


def test_a_bad_setting_in_the_configmap_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_WORKERS", "two")
    with pytest.raises(ConfigError, match="LLM_WORKERS"):
        checked_config()


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = doc
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        target[int(last) if last.isdigit() else last] = value

    return change


POD = "spec.template.spec"
MISTAKES = {  # what a user may write, and the object it goes in
    "a misspelt field": ("Deployment", _set(f"{POD}.terminationGracePeriodSecond", 330)),
    "a number as text": ("Deployment", _set("spec.replicas", "two")),
    "a probe without its port": ("Deployment", _set(f"{POD}.containers.0.readinessProbe.httpGet.port", None)),
    "a preStop sleep in words": (
        "Deployment",
        _set(f"{POD}.containers.0.lifecycle.preStop.sleep.seconds", "ten"),
    ),
    "memory in a unit Kubernetes lacks": (
        "Deployment",
        _set(f"{POD}.containers.0.resources.limits.memory", [4]),
    ),
    "a PDB with a list for a count": ("PodDisruptionBudget", _set("spec.maxUnavailable", [1])),
    "an autoscaler bound as text": ("HorizontalPodAutoscaler", _set("spec.minReplicas", "two")),
    "a pool with too many ports": (
        "InferencePool",
        _set("spec.targetPorts", [{"number": 8000 + i} for i in range(9)]),
    ),
    "a pool's unknown failure mode": (
        "InferencePool",
        _set("spec.endpointPickerRef.failureMode", "Sometimes"),
    ),
    "a pool's misspelt selector": ("InferencePool", _set("spec.selectr", {"app": "llm-server"})),
    "a route timeout in words": ("HTTPRoute", _set("spec.rules.0.timeouts.request", "1 hour")),
    "a route to an unknown kind of backend": ("HTTPRoute", _set("spec.rules.0.backendRefs.0.kind", "")),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_what_a_user_can_get_wrong_a_schema_catches(mistake: str) -> None:
    kind, change = MISTAKES[mistake]
    doc = copy.deepcopy(by_kind(render(KUSTOMIZE_ROOT / "overlays" / "inference-gateway"))[kind])
    assert not problems(doc)
    change(doc)
    assert problems(doc), mistake


SIZING = {  # what no schema sees
    "a grace period shorter than the drain": ("Deployment", _set(f"{POD}.terminationGracePeriodSeconds", 30)),
    "a drain shorter than a wait and a generation": ("ConfigMap", _set("data.LLM_GRACEFUL_TIMEOUT", "310")),
    "a route that cuts streams": ("HTTPRoute", _set("spec.rules.0.timeouts.request", "300s")),
    "a pool that selects no pod": ("InferencePool", _set("spec.selector.matchLabels", {"app": "vllm"})),
    "a pool on another port": ("InferencePool", _set("spec.targetPorts", [{"number": 8080}])),
    "liveness on readiness": (
        "Deployment",
        _set(f"{POD}.containers.0.livenessProbe.httpGet.path", "/health/ready"),
    ),
    "pods without the engine type": (
        "Deployment",
        _set(
            "spec.template.metadata.labels",
            {
                "app.kubernetes.io/name": "llm-server",
                "app.kubernetes.io/component": "server",
                "app.kubernetes.io/part-of": "llm-server",
            },
        ),
    ),  # fmt: skip
}


@pytest.mark.parametrize("mistake", SIZING)
def test_what_no_schema_sees_the_sizing_check_catches(mistake: str) -> None:
    kind, change = SIZING[mistake]
    docs = copy.deepcopy(render(KUSTOMIZE_ROOT / "overlays" / "inference-gateway"))
    change(by_kind(docs)[kind])
    assert sizing_problems(docs), mistake


def test_yamllint_finds_nothing() -> None:
    config = KUSTOMIZE_ROOT / ".yamllint.yaml"
    linted = subprocess.run(
        [sys.executable, "-m", "yamllint", "--strict", "-c", str(config), str(KUSTOMIZE_ROOT)],
        capture_output=True,
        text=True,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr


@pytest.mark.parametrize("overlay", [*OVERLAYS, "components"])
def test_checkov_finds_nothing(overlay: str, with_components: Path, tmp_path: Path) -> None:
    """Non-root, no privilege escalation, read-only root, resource limits, a network policy..."""
    built = subprocess.run(
        [str(manifests.KUBECTL), "kustomize", str(overlay_dirs(with_components)[overlay])],
        capture_output=True,
        text=True,
        check=True,
    )
    (tmp_path / "rendered.yaml").write_text(built.stdout)
    scanned = subprocess.run(
        [str(CHECKOV), "--directory", str(tmp_path), "--framework", "kubernetes", "--compact", "--quiet",
         "--skip-download", "--output", "json"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert scanned.returncode == 0, scanned.stdout[-4000:] + scanned.stderr[-2000:]
    assert '"failed": 0' in scanned.stdout
    assert '"passed": 0' not in scanned.stdout  # it did check something
