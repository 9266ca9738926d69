package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version is set at link time for releases (-ldflags "-X main.buildVersion=v1.2.3");
// otherwise the module version or the VCS revision the binary was built from is
// shown.
var buildVersion = ""

// versionString is what --version prints after "capfs ": the version, the
// commit (with "+dirty" when built from a modified tree), and the Go version.
func versionString() string {
	v := buildVersion
	var rev, at string
	dirty := false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	var b strings.Builder
	b.WriteString(v)
	if rev != "" {
		b.WriteString(" (commit ")
		b.WriteString(rev[:min(12, len(rev))])
		if dirty {
			b.WriteString("+dirty")
		}
		if at != "" {
			b.WriteString(", ")
			b.WriteString(at)
		}
		b.WriteString(")")
	}
	b.WriteString(" ")
	b.WriteString(runtime.Version())
	b.WriteString(" ")
	b.WriteString(runtime.GOOS + "/" + runtime.GOARCH)
	return b.String()
}
