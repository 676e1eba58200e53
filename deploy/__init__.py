"""Deployment: the embedded runner, the ``deskpilot`` command line, Dockerfile and manifests."""
