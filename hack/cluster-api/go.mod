// Pinned source of Cluster API's CRDs (config/crd/bases/) for the Cluster
// Stack tests. Nothing is built from it: the test kit runs
// `go mod download -json sigs.k8s.io/cluster-api` here, which fetches the
// module through the module proxy, checks it against go.sum, and names its
// directory in the module cache. Nothing imports the module, so do not run
// `go mod tidy` here (it would drop the require line).
module operator-suite.local/hack/cluster-api

go 1.26.0

require sigs.k8s.io/cluster-api v1.13.6
