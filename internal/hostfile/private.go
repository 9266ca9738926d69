package hostfile

import (
	"fmt"
	"os"
)

// CheckPrivateDir refuses a directory d that is a symlink, is not owned by
// this user (where the system says) or is writable by others: a directory
// capfs keeps its own state in.
func CheckPrivateDir(d string) error {
	st, err := os.Lstat(d)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", d)
	}
	if ownedByOther(st) {
		return fmt.Errorf("%s is owned by another user", d)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by other users", d)
	}
	return nil
}
