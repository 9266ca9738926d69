// Package deps pins third-party dependencies in go.mod while the packages that use
// them are being written in parallel. It has no code and is removed once they land.
package deps

import (
	_ "github.com/BurntSushi/toml"
	_ "golang.org/x/sys/unix"
)
