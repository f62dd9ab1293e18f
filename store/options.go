package store

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// Defaults of Options fields left zero.
const (
	DefaultBlobFileSize        = 1 << 30 // 1 GiB
	DefaultCatalogCacheSize    = 8 << 20
	DefaultCatalogMemTableSize = 4 << 20
	// MinBlobFileSize is the smallest seal size: the blob header and one
	// 4 KiB block. Smaller values are refused by Validate.
	MinBlobFileSize = format.BlobHeaderSize + format.Alignment
	// DefaultCompactLiveRatio: files less than half live are rewritten.
	DefaultCompactLiveRatio = 0.5
	// DefaultAccessFlushInterval is how often access statistics are saved.
	DefaultAccessFlushInterval = time.Minute
)

// Options configure Open. The zero value is usable: EnsureDefaults fills in
// every zero field. Open works on its own copy.
type Options struct {
	// FS is the file system every file goes through, blob files included.
	// Default vfs.Default (the OS). Blob files are mmapped only when FS's
	// files expose an OS descriptor (File.Fd() != vfs.InvalidFd).
	FS vfs.FS
	// BlobFileSize is the size at which a blob file is sealed and a new one
	// started. A packet larger than it still goes in one extent, alone in
	// its file. Default DefaultBlobFileSize.
	BlobFileSize int64
	// DisableChecksums turns off CRC32C verification of chunks on read.
	// Verification is on by default; CRCs are always computed and stored on
	// write, so turning it back on later verifies everything.
	DisableChecksums bool
	// DisableMmap makes reads copy chunks even on an OS file system.
	DisableMmap bool
	// ReadOnly opens an existing store without writing anything: Put and
	// Delete return ErrReadOnly, and a missing store is ErrNotFound. The
	// LOCK is still taken, so a read-only DB never sees a writer's catalog
	// in flux.
	ReadOnly bool
	// MustExist makes Open refuse, with ErrNotFound, a directory that
	// holds no store (no FORMAT file) instead of creating one there; as
	// for ReadOnly, nothing is created or left in such a directory, not
	// even the LOCK file. For tools whose verbs must never create a store
	// by a typo (rm, gc, compact).
	MustExist bool
	// LockWait is how long a read-write Open (and Recover) waits for
	// DIR/LOCK while others hold it; 0, the default, does not wait: a held
	// lock is ErrLocked at once. While a writer waits, read-only opens that
	// arrive are refused (ErrLocked, "a read-write open is waiting"), so
	// readers that come and go cannot starve it; the ones already in finish
	// first. Read-only opens never wait.
	LockWait time.Duration
	// Logger receives the store's and the catalog's messages; Pebble's
	// informational messages go at Debug level. Default: a logger that
	// discards everything, so that a library embedded in a server writes
	// nothing to the host's slog.Default() unless asked to.
	Logger *slog.Logger
	// CatalogCacheSize is the Pebble block cache size in bytes. Default
	// DefaultCatalogCacheSize.
	CatalogCacheSize int64
	// CatalogMemTableSize is Pebble's memtable size in bytes. Default
	// DefaultCatalogMemTableSize.
	CatalogMemTableSize uint64
	// CompactLiveRatio is the live fraction below which Compact rewrites a
	// blob file (live bytes / extent bytes), and what Stats counts as
	// compaction debt. In (0, 1]; default DefaultCompactLiveRatio.
	CompactLiveRatio float64
	// MaxBytes caps the live extent bytes of the store (0: no cap). A Put
	// that would exceed it first evicts unpinned packets (see Eviction);
	// if that cannot make room it fails with ErrNoSpace.
	MaxBytes int64
	// Eviction picks the packets MaxBytes evicts. Default EvictLRU.
	Eviction EvictionPolicy
	// AccessFlushInterval is how often access statistics (eviction's
	// ordering hints) are written to the catalog, unsynced, besides Close.
	// Default DefaultAccessFlushInterval; negative: only at Close.
	AccessFlushInterval time.Duration
}

// EnsureDefaults fills in the zero fields of o and returns o. A nil o gets
// a new Options.
func (o *Options) EnsureDefaults() *Options {
	if o == nil {
		o = &Options{}
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.BlobFileSize == 0 {
		o.BlobFileSize = DefaultBlobFileSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CatalogCacheSize == 0 {
		o.CatalogCacheSize = DefaultCatalogCacheSize
	}
	if o.CatalogMemTableSize == 0 {
		o.CatalogMemTableSize = DefaultCatalogMemTableSize
	}
	if o.CompactLiveRatio == 0 {
		o.CompactLiveRatio = DefaultCompactLiveRatio
	}
	if o.AccessFlushInterval == 0 {
		o.AccessFlushInterval = DefaultAccessFlushInterval
	}
	return o
}

// Validate reports options that cannot work, as ErrInvalidArgument. Zero
// fields are fine (EnsureDefaults replaces them).
func (o *Options) Validate() error {
	switch {
	case o.BlobFileSize != 0 && o.BlobFileSize < MinBlobFileSize:
		return fmt.Errorf("%w: options: BlobFileSize %d is below the minimum %d", ErrInvalidArgument, o.BlobFileSize, MinBlobFileSize)
	case o.CatalogCacheSize < 0:
		return fmt.Errorf("%w: options: CatalogCacheSize %d is negative", ErrInvalidArgument, o.CatalogCacheSize)
	case o.CatalogMemTableSize != 0 && o.CatalogMemTableSize < 1<<20:
		return fmt.Errorf("%w: options: CatalogMemTableSize %d is below 1 MiB", ErrInvalidArgument, o.CatalogMemTableSize)
	case !(o.CompactLiveRatio >= 0 && o.CompactLiveRatio <= 1):
		return fmt.Errorf("%w: options: CompactLiveRatio %v is not in (0, 1]", ErrInvalidArgument, o.CompactLiveRatio)
	case o.MaxBytes < 0:
		return fmt.Errorf("%w: options: MaxBytes %d is negative", ErrInvalidArgument, o.MaxBytes)
	case o.Eviction != EvictLRU && o.Eviction != EvictLFU:
		return fmt.Errorf("%w: options: unknown Eviction %d", ErrInvalidArgument, o.Eviction)
	}
	return nil
}
