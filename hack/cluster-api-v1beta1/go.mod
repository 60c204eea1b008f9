// Pinned source of Cluster API v1.8's CRDs (config/crd/bases/), the last
// minor release that stores (and serves only) v1beta1 Clusters, for the test
// that a management cluster of that age works: its Clusters name their class
// in spec.topology.class, and no v1beta2 is served. Nothing is built from it;
// see ../cluster-api/go.mod for how the test kit fetches it. Do not run
// `go mod tidy` here (it would drop the require line).
module operator-suite.local/hack/cluster-api-v1beta1

go 1.26.0

require sigs.k8s.io/cluster-api v1.8.4
