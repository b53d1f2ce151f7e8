// Package atomicfile writes files so that readers never see a part of one:
//
//	err := atomicfile.Write("report.json", data)
//
// The data goes to a temporary file in the same folder, which is synced and
// then renamed over the target (a rename within one file system is atomic).
// On any error the temporary file is removed and the target is untouched.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path through a temporary file in the same
// folder, synced and renamed into place: readers see the old file or the
// whole new one, never a part.
func Write(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
