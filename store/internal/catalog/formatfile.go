package catalog

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// The FORMAT file says which format version a store's directory holds
// (format.EncodeFormatFile draws its 20 bytes). A store keeps it twice,
// DIR/FORMAT and DIR/FORMAT.copy, the same bytes, so that one damaged
// copy (a flipped bit, a truncation, a lost file) leaves the other to be
// trusted; a read-write open rewrites the damaged one. Stores written
// before format 1.2 have FORMAT only, until a read-write open writes
// both. Each copy is written atomically through FormatTmpName (temporary
// file, sync, rename), FORMAT first. Creating a store writes them last,
// so a directory with neither holds at most what an interrupted creation
// leaves, or is a store that lost both (blob files say so: LostFormat).
const (
	FormatFileName = "FORMAT"
	FormatCopyName = "FORMAT.copy"
	FormatTmpName  = "FORMAT.tmp"
)

// formatFiles are the copies, in the order they are read and written.
var formatFiles = [...]string{FormatFileName, FormatCopyName}

// Format is what ReadFormat found.
type Format struct {
	// Version is the store's format version: the newer of its good
	// copies' versions (a read-write open stopped between writing the two
	// leaves them different). Zero unless Found.
	Version format.Version
	// Found: at least one copy is good.
	Found bool
	// Exists: at least one copy exists, good or not.
	Exists bool
	// Bad says, one line each, which copies are missing, unreadable,
	// damaged or older than Version, and why.
	Bad []string
}

// Stale reports whether a read-write open of code writing version cur
// rewrites both copies: one of them is bad, or the store is at an older
// version than cur.
func (f *Format) Stale(cur format.Version) bool {
	return len(f.Bad) > 0 || f.Version.Compare(cur) < 0
}

// formatError is ReadFormat's error when no copy is good: it says what is
// wrong with each and wraps each one's error (ErrCorruption for bad
// bytes, or the I/O error).
type formatError struct {
	msg  string
	errs []error
}

func (e *formatError) Error() string   { return e.msg }
func (e *formatError) Unwrap() []error { return e.errs }

// ReadFormat reads and checks both copies of the FORMAT file in dir.
// A copy whose bytes are intact and name a newer major version is
// ErrVersion, whatever the other says. When neither copy is good but one
// exists, the error wraps what is wrong with each (ErrCorruption for bad
// bytes). When neither exists, it returns a Format with Exists false and
// no error.
func ReadFormat(fs vfs.FS, dir string) (Format, error) {
	var f Format
	var errs []error
	var good []format.Version
	copyMissing := false
	for _, name := range formatFiles {
		path := fs.PathJoin(dir, name)
		b, err := readSmall(fs, path)
		if errors.Is(err, iofs.ErrNotExist) {
			f.Bad = append(f.Bad, name+": missing")
			copyMissing = name == FormatCopyName
			continue
		}
		f.Exists = true
		var v format.Version
		if err == nil {
			v, err = format.DecodeFormatFile(b)
		}
		switch {
		case errors.Is(err, format.ErrVersion):
			return Format{}, fmt.Errorf("store: %s: %w", path, err)
		case err != nil:
			errs = append(errs, err)
			f.Bad = append(f.Bad, fmt.Sprintf("%s: %v", name, err))
		default:
			good = append(good, v)
		}
	}
	for _, v := range good {
		if !f.Found || v.Compare(f.Version) > 0 {
			f.Version = v
		}
		f.Found = true
	}
	if len(f.Bad) == 1 && copyMissing && f.Found && f.Version.Compare(format.Version12) < 0 {
		f.Bad = nil // FORMAT.copy came with 1.2: an older store has none
	}
	if len(good) == 2 && good[0] != good[1] {
		older, ov := formatFiles[0], good[0]
		if good[0].Compare(good[1]) > 0 {
			older, ov = formatFiles[1], good[1]
		}
		f.Bad = append(f.Bad, fmt.Sprintf("%s: version %v, older than %v", older, ov, f.Version))
	}
	if f.Exists && !f.Found {
		return f, &formatError{
			msg:  fmt.Sprintf("store: %s has no good copy of its FORMAT file (%s)", dir, strings.Join(f.Bad, "; ")),
			errs: errs,
		}
	}
	return f, nil
}

// LostFormat, for a directory with neither copy of FORMAT, returns an
// error wrapping ErrCorruption when its blobs subdirectory holds blob
// files: it is a store that lost its FORMAT files, never to be taken for
// an empty directory. It is nil otherwise.
func LostFormat(fs vfs.FS, dir, blobs string) error {
	names, err := fs.List(fs.PathJoin(dir, blobs))
	if err != nil {
		return nil
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".blob") {
			return fmt.Errorf("%w: %s has blob files but neither %s nor %s", format.ErrCorruption, dir, FormatFileName, FormatCopyName)
		}
	}
	return nil
}

// CheckLeftovers refuses (ErrInvalidArgument) a directory without FORMAT
// that holds anything but the names given: what an interrupted creation
// leaves.
func CheckLeftovers(fs vfs.FS, dir string, allowed ...string) error {
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("store: list %s: %w", dir, err)
	}
next:
	for _, n := range names {
		for _, a := range allowed {
			if n == a {
				continue next
			}
		}
		return fmt.Errorf("%w: %s has no FORMAT file but holds %q: not a kvstore store", format.ErrInvalidArgument, dir, n)
	}
	return nil
}

// WriteFormat writes both copies of the FORMAT file for version v, each
// atomically (temporary file, sync, rename), FORMAT first, and syncs the
// directory, which also makes what was created in it durable. A crash
// at any point leaves each copy whole, old or new. It is the last step of
// creating a store, and how a read-write open upgrades or repairs one.
func WriteFormat(fs vfs.FS, dir string, v format.Version) error {
	tmp := fs.PathJoin(dir, FormatTmpName)
	for _, name := range formatFiles {
		// Encoded afresh for each copy: a vfs.File may scribble over the
		// buffer it was given once Write returns (Pebble's MemFS does so
		// in race and invariants builds, to catch callers that reuse it).
		b := format.EncodeFormatFile(v)
		f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("store: create %s: %w", tmp, err)
		}
		_, err = f.Write(b)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("store: write %s: %w", tmp, err)
		}
		if err := fs.Rename(tmp, fs.PathJoin(dir, name)); err != nil {
			return fmt.Errorf("store: rename %s to %s: %w", tmp, name, err)
		}
	}
	return bloblog.SyncDir(fs, dir)
}

// BlobVersion is the newest format version named by the intact header of
// a blob file in DIR/blobs, and how many headers were read; a header that
// names a newer major is ErrVersion, a damaged one is skipped. Recover
// writes the FORMAT file from it when neither copy is good.
func BlobVersion(fs vfs.FS, blobs string) (v format.Version, n int, err error) {
	names, err := fs.List(blobs)
	if errors.Is(err, iofs.ErrNotExist) {
		return v, 0, nil
	}
	if err != nil {
		return v, 0, fmt.Errorf("store: list %s: %w", blobs, err)
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".blob") {
			continue
		}
		path := fs.PathJoin(blobs, name)
		b, err := readHead(fs, path, format.BlobHeaderSize)
		if err != nil {
			continue
		}
		hv, err := format.BlobHeaderVersion(b)
		if errors.Is(err, format.ErrVersion) {
			return v, n, fmt.Errorf("store: %s: %w", path, err)
		}
		if err != nil {
			continue
		}
		if n == 0 || hv.Compare(v) > 0 {
			v = hv
		}
		n++
	}
	return v, n, nil
}

// readSmall reads a small file whole.
func readSmall(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// readHead reads the first n bytes of a file (fewer if it is shorter).
func readHead(fs vfs.FS, path string, n int64) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}
