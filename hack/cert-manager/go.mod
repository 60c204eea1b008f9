// Pinned source of cert-manager's CRDs (deploy/crds/): the Typesense operator's Certificate (spec.tls.
// issuerRef) is validated against them. Nothing is built from it yet: the test kit runs `go mod
// download -json github.com/cert-manager/cert-manager` here, which fetches the module through the
// module proxy, checks it against go.sum, and names its directory in the module cache. Nothing imports
// the module, so do not run `go mod tidy` here (it would drop the require line).
module operator-suite.local/hack/cert-manager

go 1.26.0

require github.com/cert-manager/cert-manager v1.21.2
