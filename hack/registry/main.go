// The registry the tests and the sandbox run: distribution's own command, with only what they use
// compiled in (storage on the local filesystem or in memory; htpasswd, token and silly access). The
// cloud storage drivers (Azure, GCS, S3, CloudFront) would cost a cold build some 30 s of compiling
// their SDKs on 2 cores, for nothing a run here ever reaches.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/auth/silly"
	_ "github.com/distribution/distribution/v3/registry/auth/token"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
