"""`make k8s-check`: deploy/k8s checked without a cluster (issue 31).

Every overlay under deploy/k8s/overlays is rendered with kubectl's kustomize (kubectl.py), each object validated
against the Kubernetes API schemas (kubernetes-validate, strict), then the rig's rules (checks.py: probes,
limits, non-root, read-only root, secrets only from the Secret, Service ports, Prometheus discovery, locust
workers) and every rig container's command line parsed by the real parsers (argv.py).
"""
