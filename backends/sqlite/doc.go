// Package sqlite is a persistent vfs.Backend in one SQLite file (modernc.org/sqlite,
// pure Go): agent scratch that survives the session and can be copied, inspected
// and rolled back as one file.
package sqlite
