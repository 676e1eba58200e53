"""The gateway's tests (a package, so modules import the helpers of ``conftest``)."""
