// Package remote is the REAPI client of backends/cas (work in progress).
package remote
import (
	_ "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	_ "google.golang.org/genproto/googleapis/bytestream"
)
