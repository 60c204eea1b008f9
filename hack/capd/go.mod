// Pinned source of the Cluster API Docker provider's CRDs
// (infrastructure/docker/config/crd/bases/ of sigs.k8s.io/cluster-api/test)
// for the Cluster Stack tests. A module of its own, apart from
// ../cluster-api: cluster-api/test v1.14.2 requires cluster-api v1.14.2, which
// would override that pin. Nothing is built from it: the test kit runs
// `go mod download -json sigs.k8s.io/cluster-api/test` here. Nothing imports
// the module, so do not run `go mod tidy` here (it would drop the require line).
module operator-suite.local/hack/capd

go 1.26.0

require sigs.k8s.io/cluster-api/test v1.14.2
