"""Typesense over TLS (``spec.tls``), whose parts live where their kind of code lives; this is the map.

Here, pure: ``check`` says whether a certificate, its key and its CA serve the names clients use, and
why not; ``secret`` reads what a certificate Secret holds and words the CertificateReady condition.
Elsewhere, each in its room:

- the spec (``TlsSpec``, the issuer or Secret it names): :mod:`typesense_operator.api.tls`;
- the children: the cert-manager Certificate, the served copy of the Secret, the nodes' HTTPS settings
  and probes: :mod:`typesense_operator.resources.tls`;
- the cluster's step that checks the certificate and copies it for the pods:
  :mod:`typesense_operator.controller.cluster.tls`;
- verified HTTPS to the nodes when the operator probes them: :mod:`typesense_operator.quorum.probe`.
"""
