package remote

import "github.com/capfs/capfs/vfs"

func mustPath(s string) vfs.Path { return vfs.MustParse(s) }
