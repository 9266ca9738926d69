package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capfs/capfs/vfs"
)

// envRunLazy, when set to 0 or 1, decides run's default mode (--lazy or
// --no-lazy override it).
const envRunLazy = "CAPFS_RUN_LAZY"

// joinGuest joins a namespace path and a path relative to it.
func joinGuest(p vfs.Path, rel string) string {
	if p.IsRoot() {
		return rel
	}
	if rel == "" || rel == "." {
		return p.String()
	}
	return p.String() + "/" + rel
}

// climbs reports whether relative host path rel leaves its base ("..", "../x").
func climbs(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// humanBytes shows n bytes in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// linuxOnlyCmd is the command name that accepts any arguments and fails with
// not_supported and why: what a Linux-only command is on other systems
// (cmd_other.go).
func linuxOnlyCmd(name, short, why string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              short + " (Linux only)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return failed(vfs.NewError(vfs.CodeNotSupported, name, vfs.Path{}, why))
		},
	}
}
