package memory

import (
	"testing"
	"unsafe"
)

// TestNodeLayout pins the node's cache-line layout (see node) on 64-bit platforms.
func TestNodeLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("layout is tuned for 64-bit platforms")
	}
	var n node
	if s := unsafe.Sizeof(n); s != 128 {
		t.Errorf("node is %d bytes, want 128 (one size class, 128-byte aligned)", s)
	}
	if o := unsafe.Offsetof(n.mu); o != 64 {
		t.Errorf("node.mu at offset %d, want 64 (start of the second cache line)", o)
	}
	if o := unsafe.Offsetof(n.dir) + unsafe.Sizeof(n.dir); o > 64 {
		t.Errorf("node.dir ends at %d, past the first cache line", o)
	}
}

// TestHandleSize pins the handle to the 48-byte size class on 64-bit platforms.
func TestHandleSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("layout is tuned for 64-bit platforms")
	}
	if s := unsafe.Sizeof(handle{}); s > 48 {
		t.Errorf("handle is %d bytes, want at most 48", s)
	}
}
