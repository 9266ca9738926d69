package authority

import (
	"testing"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/vfs"
	"github.com/capfs/capfs/vfs/vfstest"
)

// quotaFS keeps every optional interface but HostPather, and its files
// every optional File interface but, on a file open for writing, the host
// descriptor.
func TestQuotaFSForwardsOptionalInterfaces(t *testing.T) {
	wrap := func(b vfs.Backend) vfs.Backend { return newQuotaFS(b, 1<<20) }
	vfstest.CheckForwards(t, memory.New(), wrap, vfstest.Forwarding{
		Withheld: map[string]string{"HostPather": "a host directory bound into a sandbox would bypass the account"},
		Writable: &vfstest.Forwarding{
			Withheld: map[string]string{"hostfd.Filer": "a write through the descriptor would bypass the account"},
		},
	})
	vfstest.CheckClaims(t, memory.New(), wrap)
}
