"""Test and demo infrastructure: the local Kubernetes control plane and its pytest fixtures.

Nothing in here is used by the operators at run time. :mod:`.binaries` builds
the control-plane programs from pinned Go modules, :mod:`.pki` makes the
certificates, :mod:`.controlplane` runs etcd, kube-apiserver,
kube-controller-manager and kube-scheduler on loopback, and :mod:`.fixtures`
wraps them for pytest.
"""
