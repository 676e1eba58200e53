"""Deployment: the embedded runner (``deskpilot up``), the Dockerfile, the compose override,
Kubernetes manifests, the Grafana dashboard, the Redis ACL and the settings reference; in rooms of
their own, the ``deskpilot`` command line (:mod:`deploy.cli`), the quality evaluations
(:mod:`deploy.evals`) and the benchmarks (:mod:`deploy.bench`)."""
