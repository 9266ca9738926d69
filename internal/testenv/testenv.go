// Package testenv holds what test binaries share to leave a machine as they found
// it. It is imported only by tests.
package testenv

import (
	"os"
)

// PrivateTmp points $CAPFS_TMPDIR (where checkouts are made) at a new temporary
// directory for the test binary's run, and $CAPFS_CACHE_DIR (capfs run's build
// caches) beneath it, and returns a function that unmounts
// whatever checkouts left mounted beneath it (a kept checkout is a tmpfs of its
// own when the tests run as root), removes it, and restores the variable. A
// test binary calls it in TestMain around m.Run, so no kept checkout outlives
// the run, wherever the tests leave them.
//
// A test binary that a test re-runs as a child (a crash test killing it) inherits
// the parent's directory and makes none of its own, so a killed child leaves
// nothing behind.
func PrivateTmp() (cleanup func(), err error) {
	const env, mark, cacheEnv = "CAPFS_TMPDIR", "CAPFS_TESTENV_TMP", "CAPFS_CACHE_DIR"
	if os.Getenv(mark) != "" && os.Getenv(env) == os.Getenv(mark) {
		return func() {}, nil
	}
	old, had := os.LookupEnv(env)
	// On /dev/shm when it is a tmpfs, where checkouts go by default, so the tests
	// see what a run sees.
	dir, err := os.MkdirTemp(shmParent(), "capfs-test-tmp-")
	if err != nil {
		return nil, err
	}
	os.Setenv(env, dir)
	os.Setenv(mark, dir)
	// capfs run's build caches too (capfs cache), so that no test fills the
	// user's own cache directory.
	oldCache, hadCache := os.LookupEnv(cacheEnv)
	os.Setenv(cacheEnv, dir+"/cache")
	return func() {
		unmountBeneath(dir)
		os.RemoveAll(dir)
		os.Unsetenv(mark)
		if hadCache {
			os.Setenv(cacheEnv, oldCache)
		} else {
			os.Unsetenv(cacheEnv)
		}
		if had {
			os.Setenv(env, old)
		} else {
			os.Unsetenv(env)
		}
	}, nil
}
