// Package dirsync makes the names created in a directory durable, for the
// code outside the store (the CLI, the benchmarks) that writes files
// through the os package; the store does the same through its vfs
// (bloblog.SyncDir).
package dirsync

import "os"

// Sync fsyncs directory dir, so that the files created or renamed in it
// survive a crash; a failure to close the directory is an error too.
func Sync(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
