//go:build linux

package syncback

// SetTestHook sets the hook the apply calls at its points (see testHook).
func SetTestHook(f func(point string)) { testHook = f }
