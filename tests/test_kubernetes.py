"""The Kubernetes manifests (``deploy/kubernetes/``), checked offline: every document
against the Kubernetes API's own schemas (kubernetes-validate ships them, strict: a
field the API does not know is an error, as ``kubectl apply`` would refuse it), then
what a user relies on: the pods run what compose's ``service`` runs, with its settings,
probed on /readyz and /healthz, scaled by the autoscaler, migrated by the Job.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

ROOT = Path(__file__).resolve().parents[1]
KUBERNETES = ROOT / "deploy" / "kubernetes"
VERSIONS = ("1.29", "1.37")  # an older cluster's, and the newest kubernetes-validate knows
EXAMPLE = "secret.example.yaml"  # the Secret to make, not applied by the kustomization

Manifest = dict[str, Any]


def documents(path: Path) -> list[Manifest]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def applied() -> list[Manifest]:
    """What ``kubectl apply -k deploy/kubernetes/`` applies, in the kustomization's order."""
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    return [d for name in kustomization["resources"] for d in documents(KUBERNETES / name)]


def one(kind: str, name: str | None = None) -> Manifest:
    [found] = [d for d in applied() if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    return found


def container(manifest: Manifest) -> Manifest:
    [found] = manifest["spec"]["template"]["spec"]["containers"]
    return found  # type: ignore[no-any-return]


def check(manifest: Manifest, version: str) -> None:
    """Raises kubernetes_validate.ValidationError where the API would refuse it."""
    try:
        kubernetes_validate.validate(manifest, version, strict=True)
    except SchemaNotFoundError as missing:  # an apiVersion or kind the API does not have
        pytest.fail(missing.message)


def compose_services() -> Manifest:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]  # type: ignore[no-any-return]


def test_the_kustomization_applies_every_manifest_but_the_example_secret() -> None:
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    files = {path.name for path in KUBERNETES.glob("*.yaml")}
    assert sorted(kustomization["resources"]) == sorted(files - {"kustomization.yaml", EXAMPLE})
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert kustomization["images"] == [{"name": "wander", "newTag": version}]  # this release


def test_kustomize_builds_what_the_files_say() -> None:
    """What ``kubectl apply -k`` sends: the files, labelled, with the image's tag."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl on this machine: the kustomization is not built")
    built = subprocess.run(
        [kubectl, "kustomize", str(KUBERNETES)], capture_output=True, text=True, timeout=60
    )
    assert built.returncode == 0, built.stderr
    manifests = [d for d in yaml.safe_load_all(built.stdout) if d]
    assert sorted((m["kind"], m["metadata"]["name"]) for m in manifests) == sorted(
        (m["kind"], m["metadata"]["name"]) for m in applied()
    )
    for manifest in manifests:
        assert manifest["metadata"]["labels"]["app.kubernetes.io/part-of"] == "wander"
        check(manifest, VERSIONS[-1])
    images = {container(m)["image"] for m in manifests if m["kind"] in ("Deployment", "Job")}
    assert images == {"wander:0.1.0"}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_validates_against_the_kubernetes_schemas(version: str) -> None:
    manifests = applied() + documents(KUBERNETES / EXAMPLE)
    assert {m["kind"] for m in manifests} == {
        "ConfigMap", "Secret", "Service", "Job", "Deployment", "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
    }  # fmt: skip
    for manifest in manifests:
        check(manifest, version)


def misspelt_field(deployment: Manifest) -> None:
    container(deployment)["readinessProbe"]["httpGet"]["paht"] = "/readyz"


def wrong_type(deployment: Manifest) -> None:
    container(deployment)["ports"][0]["containerPort"] = "eight thousand"


def missing_field(deployment: Manifest) -> None:
    del container(deployment)["name"]


@pytest.mark.parametrize("breakage", [misspelt_field, wrong_type, missing_field])
def test_a_broken_manifest_is_refused(breakage: Any) -> None:
    deployment = copy.deepcopy(one("Deployment"))
    breakage(deployment)
    with pytest.raises(kubernetes_validate.ValidationError):
        check(deployment, VERSIONS[-1])


def test_an_api_version_kubernetes_does_not_have_is_refused() -> None:
    autoscaler = {**one("HorizontalPodAutoscaler"), "apiVersion": "autoscaling/v3"}
    with pytest.raises(pytest.fail.Exception, match="autoscaling/v3"):
        check(autoscaler, VERSIONS[-1])


def test_the_pods_run_the_service_as_compose_does() -> None:
    deployment, pod = one("Deployment"), one("Deployment")["spec"]["template"]
    wander = container(deployment)
    dockerfile = (ROOT / "Dockerfile").read_text()
    service_stage = dockerfile.split(" AS service\n", 1)[1].split("\nFROM ", 1)[0]
    # The image "wander" is `docker build -t wander .`, which builds the last stage.
    assert dockerfile.rsplit("\nFROM ", 1)[1].startswith("python:3.11-slim AS service\n")
    [user] = re.findall(r"^USER (\d+)$", service_stage, re.MULTILINE)
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"]["runAsUser"] == int(user)
    assert wander["image"] == "wander" and "command" not in wander  # the image's entrypoint
    assert wander["ports"] == [{"name": "http", "containerPort": 8000}]  # EXPOSE 8000
    assert wander["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert wander["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert wander["resources"]["requests"]["cpu"]  # the autoscaler's utilization needs it
    assert pod["metadata"]["labels"] == deployment["spec"]["selector"]["matchLabels"]
    # Every setting compose gives its service, from the ConfigMap or the Secret.
    secret = documents(KUBERNETES / EXAMPLE)[0]
    assert wander["envFrom"] == [
        {"configMapRef": {"name": one("ConfigMap")["metadata"]["name"]}},
        {"secretRef": {"name": secret["metadata"]["name"]}},
    ]
    settings = one("ConfigMap")["data"] | secret["stringData"]
    assert set(compose_services()["service"]["environment"]) <= set(settings)
    # The root file system is read-only: the workers' metrics go to a writable volume.
    assert wander["securityContext"]["readOnlyRootFilesystem"] is True
    mounted = {mount["mountPath"] for mount in wander["volumeMounts"]}
    assert settings["PROMETHEUS_MULTIPROC_DIR"] in mounted


def test_the_service_reaches_the_pods_and_the_autoscaler_scales_them() -> None:
    deployment, service = one("Deployment"), one("Service", "wander")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["targetPort"] == container(deployment)["ports"][0]["name"]
    autoscaler = one("HorizontalPodAutoscaler")
    assert autoscaler["apiVersion"] == "autoscaling/v2"
    assert autoscaler["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1", "kind": "Deployment", "name": deployment["metadata"]["name"],
    }  # fmt: skip
    [metric] = autoscaler["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert 1 < autoscaler["spec"]["minReplicas"] < autoscaler["spec"]["maxReplicas"]
    assert "replicas" not in deployment["spec"]  # the autoscaler's, not reset by an apply


def test_the_job_migrates_the_archive_and_the_stores_are_external() -> None:
    job, deployment = one("Job"), one("Deployment")
    migrate = container(job)
    assert migrate["command"] == compose_services()["migrate"]["entrypoint"]
    assert migrate["command"] == ["wander", "db", "upgrade"]
    assert migrate["image"] == container(deployment)["image"]
    assert migrate["envFrom"] == container(deployment)["envFrom"]
    external = {s["metadata"]["name"]: s["spec"] for s in applied() if s["kind"] == "Service"}
    external.pop("wander")
    assert {spec["type"] for spec in external.values()} == {"ExternalName"}
    urls = documents(KUBERNETES / EXAMPLE)[0]["stringData"]
    hosts = {
        url.split("@", 1)[1].split(":", 1)[0]
        for key, url in urls.items()
        if key in ("WANDER_REDIS_URL", "WANDER_DATABASE_URL")
    }
    assert hosts == set(external) == {"wander-redis", "wander-postgres"}
