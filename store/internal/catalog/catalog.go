package catalog

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/cowfs"
)

// Catalog is the Pebble database in DIR/catalog. It keeps every small value
// of the store (keys in keys.go); tensors never go in it.
type Catalog struct {
	DB *pebble.DB // for batches and iterators; reads and commits go through the methods
}

// Options are the catalog's settings (the store's Options say what each
// means and its default).
type Options struct {
	FS           vfs.FS
	CacheSize    int64
	MemTableSize uint64
	ReadOnly     bool
	// InMemory opens an existing catalog read-write over FS with every
	// write Pebble makes kept in memory (store/internal/cowfs), and
	// automatic compactions off: for a read-only store whose catalog must
	// take a batch that may not reach the disk. ReadOnly is ignored.
	InMemory bool
	Logger   *slog.Logger
}

// ErrFailed: an earlier catalog commit failed in a way the catalog cannot
// recover from without reopening (Pebble treats WAL errors as fatal). The
// store returns it as store.ErrFailed.
var ErrFailed = errors.New("kvstore/store: store failed, reopen it")

// Open opens (or, unless read-only, creates) the catalog in dir on o.FS.
func Open(dir string, o *Options) (c *Catalog, err error) {
	defer recoverFatal(&err, format.ErrCorruption, "open catalog "+dir)
	cache := pebble.NewCache(o.CacheSize)
	defer cache.Unref()
	fs, readOnly, mustExist := o.FS, o.ReadOnly, o.ReadOnly
	if o.InMemory {
		fs, readOnly, mustExist = cowfs.New(o.FS), false, true
	}
	db, err := pebble.Open(dir, &pebble.Options{
		FS:                          fs,
		Cache:                       cache,
		MemTableSize:                o.MemTableSize,
		ReadOnly:                    readOnly,
		ErrorIfNotExists:            mustExist,
		DisableAutomaticCompactions: o.InMemory,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      pebbleLogger{o.Logger},
		// Pebble's default for on-disk corruption is Logger.Fatalf, which
		// would end the process of a server embedding the store on one bad
		// block. The read that found it returns an error anyway (wrapped
		// in ErrCorruption by the callers), so the event is only logged.
		EventListener: &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
			o.Logger.Error("catalog corruption", "component", "catalog", "file", info.Path, "err", errText(info.Details), "remedy", Remedy)
		}},
	})
	if err != nil {
		return nil, openError(dir, err)
	}
	return &Catalog{DB: db}, nil
}

// RequireExisting checks, before Pebble opens the catalog of an existing
// store, that dir still names a manifest (Pebble's marker.manifest.* file,
// which is empty, so copy tools skip it). Without one Pebble would create a
// new, empty catalog over the old one and delete its tables: every packet
// gone, and no error. Missing, it is ErrCorruption.
func RequireExisting(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("%w: store has a FORMAT file but its catalog %s cannot be listed: %v", format.ErrCorruption, dir, err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "marker.manifest.") {
			return nil
		}
	}
	return fmt.Errorf("%w: catalog %s has no manifest marker (marker.manifest.*): refusing to let Pebble start an empty catalog over it", format.ErrCorruption, dir)
}

// openError wraps a failed Pebble open in a sentinel: the file system's
// own (permission, no space, read-only) when it is one, else
// ErrCorruption: an existing catalog Pebble cannot open (a damaged or
// missing MANIFEST, OPTIONS, marker or table) is damage, whatever words
// Pebble gives it. (A store without a catalog at all is created, or refused
// as ErrNotFound when read-only, before this is reached.)
func openError(dir string, err error) error {
	for _, s := range []error{format.ErrCorruption, iofs.ErrPermission, syscall.ENOSPC, syscall.EROFS} {
		if errors.Is(err, s) {
			if s == format.ErrCorruption {
				return fmt.Errorf("store: open catalog %s: %w (%s)", dir, err, Remedy)
			}
			return fmt.Errorf("store: open catalog %s: %w", dir, err)
		}
	}
	return fmt.Errorf("%w: open catalog %s: %s (%s)", format.ErrCorruption, dir, errText(err), Remedy)
}

// Remedy is what an error of a damaged catalog tells its reader to do.
const Remedy = "the catalog is damaged: kvstore recover DIR (store.Recover) rebuilds it from the blob files"

// errText is err's message on one line: Pebble's errors carry details
// (paths, stacks, "<corruption detail carrier>") on the lines after the
// first, which belong in a debugger, not in an error a user reads.
func errText(err error) string {
	if err == nil {
		return ""
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return first
}

// readError wraps a failed catalog read: in ErrCorruption when Pebble found
// damage (a checksum, a table that does not parse), as itself otherwise.
func readError(what string, err error) error {
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: %s: %s (%s)", format.ErrCorruption, what, errText(err), Remedy)
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// recoverFatal turns a panic of pebbleLogger.Fatalf, which Pebble raises on
// damage it will not go on from, into an error wrapping sentinel: the
// process lives, the caller gets an error. Other panics are re-raised.
func recoverFatal(err *error, sentinel error, what string) {
	r := recover()
	if r == nil {
		return
	}
	fe, ok := r.(fatalError)
	if !ok {
		panic(r)
	}
	msg, _, _ := strings.Cut(fe.msg, "\n")
	if sentinel == format.ErrCorruption {
		msg += " (" + Remedy + ")"
	}
	*err = fmt.Errorf("%w: %s: %s", sentinel, what, msg)
}

// Get calls fn with the value of key, which is only valid during the call.
// It reports false, without calling fn, when key is absent.
func (c *Catalog) Get(key []byte, fn func(v []byte) error) (found bool, err error) {
	defer recoverFatal(&err, format.ErrCorruption, "catalog get")
	v, closer, err := c.DB.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, readError(fmt.Sprintf("catalog get %q", key), err)
	}
	defer closer.Close()
	return true, fn(v)
}

// Has reports whether key is present.
func (c *Catalog) Has(key []byte) (bool, error) {
	return c.Get(key, func([]byte) error { return nil })
}

// Scan calls fn for each key in [lower, upper) in order until fn returns
// an error or false. Keys and values are only valid during the call.
func (c *Catalog) Scan(lower, upper []byte, fn func(k, v []byte) (bool, error)) (err error) {
	defer recoverFatal(&err, format.ErrCorruption, "catalog scan")
	it, err := c.DB.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return readError("catalog scan", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			break
		}
		more, err := fn(it.Key(), v)
		if err != nil || !more {
			_ = it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return readError("catalog scan", err)
	}
	return nil
}

// Commit applies b durably (pebble.Sync). Pebble reports a failed WAL write
// through Logger.Fatalf, which pebbleLogger turns into a panic carrying a
// fatalError; commit recovers it and returns it wrapping ErrFailed.
func (c *Catalog) Commit(b *pebble.Batch) error { return commit(b, pebble.Sync) }

// CommitUnsynced applies b without waiting for Pebble's WAL to reach the
// disk (pebble.NoSync): b is visible when it returns, and durable once a
// later synced commit or Close syncs the WAL, which is one ordered log, so
// that sync covers every batch before it. It is for a batch whose every
// change the blob log already holds in fdatasynced records (put records and
// tombstones): if a crash loses the batch, recovery.Reconcile applies those
// records again when the store next opens. Errors are Commit's.
func (c *Catalog) CommitUnsynced(b *pebble.Batch) error { return commit(b, pebble.NoSync) }

func commit(b *pebble.Batch, o *pebble.WriteOptions) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(fatalError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%w: catalog commit: %s", ErrFailed, fe.msg)
		}
	}()
	if err := b.Commit(o); err != nil {
		return fmt.Errorf("store: catalog commit: %w", err)
	}
	return nil
}

// Close closes the catalog. After a fatal catalog error Pebble may report
// another one while closing;
// that too is returned wrapping ErrFailed.
func (c *Catalog) Close() (err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(fatalError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%w: close catalog: %s", ErrFailed, fe.msg)
		}
	}()
	if err := c.DB.Close(); err != nil {
		return fmt.Errorf("store: close catalog: %w", err)
	}
	return nil
}

// fatalError is what pebbleLogger.Fatalf panics with instead of exiting the
// process: library code must not exit, and commit turns it into an error.
type fatalError struct{ msg string }

// pebbleLogger routes Pebble's log lines to the store's slog.Logger:
// informational ones at Debug level.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(f string, args ...any) {
	p.l.Debug(fmt.Sprintf(f, args...), "component", "catalog")
}

func (p pebbleLogger) Errorf(f string, args ...any) {
	msg, _, _ := strings.Cut(fmt.Sprintf(f, args...), "\n")
	p.l.Error(msg, "component", "catalog")
}

func (p pebbleLogger) Fatalf(f string, args ...any) {
	msg := fmt.Sprintf(f, args...)
	first, _, _ := strings.Cut(msg, "\n")
	p.l.Error(first, "component", "catalog", "fatal", true)
	panic(fatalError{msg})
}
