// Package build is the sandboxed-build example: hello/ is a small Go project with a
// Makefile, and
//
//	cd examples/build/hello && go run ../../../cmd/capfs run -- make
//
// checks the current directory out into a private directory, runs make under
// bubblewrap (no network, its own user namespace, only the checkout writable),
// and syncs the build's outputs (bin/hello, bin/greeting.txt) back through the
// capability, printing a change summary and the audit log's path.
//
// hello/ is its own Go module (example.com/hello), so it is not part of the capfs
// module's packages; this package only holds the test that drives the capfs
// command on a copy of it.
package build
