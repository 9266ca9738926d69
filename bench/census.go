package bench

import (
	"fmt"
	"io/fs"
	"path/filepath"
)

// census counts the regular files, symlinks and directories under root (not
// counting root) and the regular files' total size.
func census(root string) (files, links, dirs int, size int64, err error) {
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		switch {
		case d.IsDir():
			dirs++
		case d.Type()&fs.ModeSymlink != 0:
			links++
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			files++
			size += fi.Size()
		default:
			return fmt.Errorf("census: unexpected %s at %s", d.Type(), p)
		}
		return nil
	})
	return files, links, dirs, size, err
}
