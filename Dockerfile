# The operator-suite runtime image: the runtime distribution (core and the three operators) and nothing
# else; its command selects the operator: typesense-operator (the default), monocle-operator or
# cluster-stack-operator.
#
# Built here without a Docker engine: `operator-suite-dev image` makes the base with mmdebstrap (Debian
# bookworm minbase with python3, reproducible for a given archive state) and builds this file with
# buildah, passing BASE pinned by the base's digest. Elsewhere, any Debian bookworm image with python3
# and python3-venv will do: BASE=<image>@sha256:<digest>.
ARG BASE=localhost/operator-suite-base:bookworm
# helm, which the Cluster Stack operator runs (`helm template`): an image holding a static helm v3 build
# at HELM_PATH. Here `operator-suite-dev image` makes one from helm's Go module, pinned in
# hack/controlplane (beside the control plane's Kubernetes libraries);
# elsewhere, any image with the official static release binary will do.
ARG HELM_IMAGE=localhost/operator-suite-helm:v3.20.2
ARG HELM_PATH=/usr/bin/helm

FROM ${HELM_IMAGE} AS helm

FROM ${BASE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/operator-suite
COPY pyproject.toml README.md /src/
COPY src /src/src
# An optional CA bundle for pip, for a network that intercepts TLS (buildah bud --secret id=pipca,src=...);
# a build secret, so it ends up in no layer.
RUN --mount=type=secret,id=pipca \
    if [ -s /run/secrets/pipca ]; then export PIP_CERT=/run/secrets/pipca; fi; \
    /opt/operator-suite/bin/pip install /src \
 && /opt/operator-suite/bin/pip uninstall --yes pip setuptools

FROM ${BASE}
ARG HELM_PATH
COPY --from=build /opt/operator-suite /opt/operator-suite
COPY --from=helm ${HELM_PATH} /usr/local/bin/helm
ENV PATH=/opt/operator-suite/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Not root; the charts also run it with a read-only root filesystem and /tmp as its only writable place.
# The user has entries in passwd and group, as distroless images' "nonroot" does, so that a tool that
# asks for its name finds one; the operators themselves never ask (they take the pod's name).
RUN echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'nonroot:x:65532:' >> /etc/group \
 && install -d -o 65532 -g 65532 -m 0700 /home/nonroot
USER 65532:65532
WORKDIR /tmp
EXPOSE 8081
CMD ["typesense-operator"]
