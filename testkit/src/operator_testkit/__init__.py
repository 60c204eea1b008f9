"""The operator suite's test kit: a distribution of its own, never installed into an operator image.

:mod:`.binaries` builds the control-plane programs from pinned Go modules,
:mod:`.pki` makes the certificates, :mod:`.controlplane` runs etcd,
kube-apiserver, kube-controller-manager and kube-scheduler on loopback, and
:mod:`.fixtures` wraps them for pytest (a ``pytest11`` plugin). :mod:`.nodes`
runs real nodes (a kubelet, containerd and runc each), :mod:`.operators` runs an operator's console
script as its own ServiceAccount, :mod:`.sandbox` puts it all together for
people, :mod:`.drivers` knows each operator's sandbox entry and test helpers, and
:mod:`.cli` is ``operator-suite-dev``. It depends on the runtime; the runtime
never imports it.
"""
