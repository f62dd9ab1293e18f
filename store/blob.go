package store

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// blobWriter is the append side of the blob log. Only the writer (under
// DB.writeMu) uses it. It appends to one active file at a time, the highest
// numbered one, and seals it once the next extent would take it past the
// seal size.
type blobWriter struct {
	fs    vfs.FS
	dir   string // DIR/blobs
	limit uint64 // Options.BlobFileSize
	// next is the number the next new file gets: the catalogued sequence. It
	// only advances when a batch cataloguing the file commits, so a file
	// abandoned before that is re-created (truncated) under the same number.
	next uint32
	cur  *activeFile
	// sealed lists files sealed in memory whose records still say unsealed;
	// the next batch writes them.
	sealed []uint32
}

// activeFile is the file extents are appended to.
type activeFile struct {
	num   uint32
	path  string
	f     vfs.File // nil until first used after Open
	end   uint64   // catalogued size: where the next extent goes
	fresh bool     // created by this writer, not yet in the catalog
}

// needsSeal reports whether an extent of n bytes must go to a new file:
// the active file already holds an extent and would grow past the limit.
func (w *blobWriter) needsSeal(n uint64) bool {
	a := w.cur
	return a != nil && a.end > format.BlobHeaderSize && a.end+n > w.limit
}

// seal stops appending to the active file.
func (w *blobWriter) seal() {
	a := w.cur
	w.cur = nil
	if a.f != nil {
		_ = a.f.Close()
	}
	if !a.fresh {
		w.sealed = append(w.sealed, a.num)
	}
}

// prepare returns the file an extent of n bytes goes to, at its end:
// the active file, reopened after Open if need be, or a new one.
func (w *blobWriter) prepare(n uint64) (*activeFile, error) {
	if w.needsSeal(n) {
		w.seal()
	}
	if w.cur == nil {
		return w.create()
	}
	if w.cur.f == nil {
		if err := w.reopen(w.cur); err != nil {
			return nil, err
		}
	}
	return w.cur, nil
}

// create starts blob file w.next: header written and the directory synced,
// so that once its first extent is synced, the file survives a crash.
func (w *blobWriter) create() (*activeFile, error) {
	a := &activeFile{num: w.next, end: format.BlobHeaderSize, fresh: true}
	a.path = w.fs.PathJoin(w.dir, blobFileName(a.num))
	f, err := w.fs.Create(a.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("store: create blob file %s: %w", a.path, err)
	}
	a.f = f
	if err := writeAt(f, a.path, format.EncodeBlobHeader(a.num), 0); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := syncDir(w.fs, w.dir); err != nil {
		_ = f.Close()
		return nil, err
	}
	w.cur = a
	return a, nil
}

// reopen opens the active file of an earlier session for writing. Bytes
// past its catalogued size are left from writes that never committed; the
// next extent overwrites them. A file shorter than its catalogued size has
// lost bytes: it is sealed and a new file started.
func (w *blobWriter) reopen(a *activeFile) error {
	f, err := w.fs.OpenReadWrite(a.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("store: open blob file %s: %w", a.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("store: stat blob file %s: %w", a.path, err)
	}
	a.f = f
	if uint64(st.Size()) < a.end {
		w.seal()
		_, err := w.create()
		return err
	}
	return nil
}

// abandon drops the active file after a failed append. A fresh file is
// forgotten (its number is reused); an older one is kept, since the next
// extent overwrites whatever the failed one left past its end.
func (w *blobWriter) abandon() {
	if a := w.cur; a != nil && a.fresh {
		_ = a.f.Close()
		w.cur = nil
	}
}

// committed records that an extent of n bytes at the end of the active file
// is catalogued, along with any sealed records and the sequence.
func (w *blobWriter) committed(n uint64) {
	a := w.cur
	a.end += n
	if a.fresh {
		a.fresh = false
		w.next = a.num + 1
	}
	w.sealed = w.sealed[:0]
}

// close releases the active file's handle.
func (w *blobWriter) close() error {
	if w.cur == nil || w.cur.f == nil {
		return nil
	}
	err := w.cur.f.Close()
	w.cur.f = nil
	if err != nil {
		return fmt.Errorf("store: close blob file %s: %w", w.cur.path, err)
	}
	return nil
}

// syncDir fsyncs directory dir, making the entries created in it durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("store: open directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: sync directory %s: %w", dir, err)
	}
	return nil
}
