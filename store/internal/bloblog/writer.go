package bloblog

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// Writer is the append side of the blob log. Only the writer (under
// DB.writeMu) uses it. It appends to one active file at a time, the highest
// numbered one, and seals it once the next extent would take it past the
// seal size.
type Writer struct {
	FS    vfs.FS
	Dir   string // DIR/blobs
	Limit uint64 // seal size (Options.BlobFileSize)
	// next is the number the next new file gets: the catalogued sequence. It
	// only advances when a batch cataloguing the file commits, so a file
	// abandoned before that is re-created (truncated) under the same number.
	Next uint32
	Cur  *Active
	// sealed lists files sealed in memory whose records still say unsealed;
	// the next batch writes them.
	Sealed []uint32
	// Seq is the sequence number the next put record or tombstone gets
	// (format/put_record.go): the catalog's next-record value, advanced by
	// the store once a batch holding it commits.
	Seq uint64
	// Room, when set, is asked before an extent of n bytes is appended:
	// its error refuses the extent (the disk is nearly full, or the store
	// holds new data). frees is true for the small records that free
	// space (a Delete's tombstone, PrepareDespiteHold), which are refused
	// only when even the catalog has no room left.
	Room func(n uint64, frees bool) error
}

// Active is the file extents are appended to.
type Active struct {
	Num   uint32
	Path  string
	F     vfs.File // nil until first used after Open
	End   uint64   // catalogued size: where the next extent goes
	Fresh bool     // created by this writer, not yet in the catalog
}

// needsSeal reports whether an extent of n bytes must go to a new file:
// the active file already holds an extent and would grow past the limit.
func (w *Writer) needsSeal(n uint64) bool {
	a := w.Cur
	return a != nil && a.End > format.BlobHeaderSize && a.End+n > w.Limit
}

// seal stops appending to the active file.
func (w *Writer) seal() {
	a := w.Cur
	w.Cur = nil
	if a.F != nil {
		_ = a.F.Close()
	}
	if !a.Fresh {
		w.Sealed = append(w.Sealed, a.Num)
	}
}

// Prepare returns the file an extent of n bytes goes to, at its end:
// the active file, reopened after Open if need be, or a new one; Room's
// error when it refuses the extent.
func (w *Writer) Prepare(n uint64) (*Active, error) {
	if w.Room != nil {
		if err := w.Room(n, false); err != nil {
			return nil, err
		}
	}
	return w.prepare(n)
}

// PrepareDespiteHold is Prepare for the small records that free space (a
// Delete's tombstone): they are written while the store holds new data,
// since the room the store released on a full disk is there for them.
func (w *Writer) PrepareDespiteHold(n uint64) (*Active, error) {
	if w.Room != nil {
		if err := w.Room(n, true); err != nil {
			return nil, err
		}
	}
	return w.prepare(n)
}

func (w *Writer) prepare(n uint64) (*Active, error) {
	if w.needsSeal(n) {
		w.seal()
	}
	if w.Cur == nil {
		return w.create()
	}
	if w.Cur.F == nil {
		if err := w.reopen(w.Cur); err != nil {
			return nil, err
		}
	}
	return w.Cur, nil
}

// create starts blob file w.Next: header written and the directory synced,
// so that once its first extent is synced, the file survives a crash.
func (w *Writer) create() (*Active, error) {
	a := &Active{Num: w.Next, End: format.BlobHeaderSize, Fresh: true}
	a.Path = w.FS.PathJoin(w.Dir, FileName(a.Num))
	f, err := w.FS.Create(a.Path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("store: create blob file %s: %w", a.Path, err)
	}
	a.F = f
	if err := WriteAt(f, a.Path, format.EncodeBlobHeader(a.Num), 0); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := SyncDir(w.FS, w.Dir); err != nil {
		_ = f.Close()
		return nil, err
	}
	w.Cur = a
	return a, nil
}

// Roll stops appending to the active file now, as sealing it does, and
// returns its number (false if there is none, or it is not catalogued
// yet): the caller commits its record sealed, so that compaction and GC
// treat it as any sealed file, and the next extent starts a new file.
func (w *Writer) Roll() (uint32, bool) {
	a := w.Cur
	if a == nil || a.Fresh {
		return 0, false
	}
	w.Cur = nil
	if a.F != nil {
		_ = a.F.Close()
	}
	return a.Num, true
}

// reopen opens the active file of an earlier Open for writing. Bytes
// past its catalogued size are left from writes that never committed; the
// next extent overwrites them. A file shorter than its catalogued size has
// lost bytes: it is sealed and a new file started.
func (w *Writer) reopen(a *Active) error {
	f, err := w.FS.OpenReadWrite(a.Path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("store: open blob file %s: %w", a.Path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("store: stat blob file %s: %w", a.Path, err)
	}
	a.F = f
	if uint64(st.Size()) < a.End {
		w.seal()
		_, err := w.create()
		return err
	}
	return nil
}

// abandon drops the active file after a failed append. A fresh file is
// forgotten (its number is reused); an older one is kept, since the next
// extent overwrites whatever the failed one left past its end.
func (w *Writer) Abandon() {
	if a := w.Cur; a != nil && a.Fresh {
		_ = a.F.Close()
		w.Cur = nil
	}
}

// committed records that an extent of n bytes at the end of the active file
// is catalogued, along with any sealed records and the sequence.
func (w *Writer) Committed(n uint64) {
	a := w.Cur
	a.End += n
	if a.Fresh {
		a.Fresh = false
		w.Next = a.Num + 1
	}
	w.Sealed = w.Sealed[:0]
}

// close releases the active file's handle.
func (w *Writer) Close() error {
	if w.Cur == nil || w.Cur.F == nil {
		return nil
	}
	err := w.Cur.F.Close()
	w.Cur.F = nil
	if err != nil {
		return fmt.Errorf("store: close blob file %s: %w", w.Cur.Path, err)
	}
	return nil
}

// SyncDir fsyncs directory dir, making the entries created in it durable.
func SyncDir(fs vfs.FS, dir string) error {
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
