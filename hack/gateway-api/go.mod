// Pinned source of the Gateway API's CRDs (config/crd/standard/) for the Typesense
// operator's HTTPRoute and ReferenceGrant tests. Nothing is built from it: the test kit
// runs `go mod download -json sigs.k8s.io/gateway-api` here, which fetches the module
// through the module proxy, checks it against go.sum, and names its directory in the
// module cache. Nothing imports the module, so do not run `go mod tidy` here (it would
// drop the require line). v1.4.1 is the version the Go operator 0.4.1 is built against.
module operator-suite.local/hack/gateway-api

go 1.26.0

require sigs.k8s.io/gateway-api v1.4.1
