// Pinned source of ORC's CRDs (config/crd/bases/ of
// github.com/k-orc/openstack-resource-controller/v2): the Images that openstack
// cluster stacks render in their classes, applied by the Cluster Stack tests.
// Nothing is built from it: the test kit runs
// `go mod download -json github.com/k-orc/openstack-resource-controller/v2` here.
// Nothing imports the module, so do not run `go mod tidy` here (it would drop
// the require line).
module operator-suite.local/hack/orc

go 1.26.0

require github.com/k-orc/openstack-resource-controller/v2 v2.3.0
