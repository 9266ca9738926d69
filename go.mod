module github.com/capfs/capfs

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/bmatcuk/doublestar/v4 v4.10.4
	github.com/go-git/go-billy/v5 v5.9.2
	github.com/spf13/afero v1.15.0
	golang.org/x/sys v0.49.0
)

require golang.org/x/text v0.39.0 // indirect
