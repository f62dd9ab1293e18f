// Package store is the kvstore engine: it keeps KV-cache packets durable,
// finds them by id and hands their tensors back as zero-copy views.
//
// # Directory
//
//	DIR/
//	  FORMAT              magic + format major version (format.EncodeFormatFile);
//	                      written last when a store is created; newer majors are refused
//	  LOCK                exclusive lock (vfs.FS.Lock), held while the store is open
//	  catalog/            Pebble v2: every small thing, keys below
//	  blobs/NNNNNN.blob   append-only payload files, sealed at Options.BlobFileSize
//
// Every file, blob files included, goes through Options.FS, so that
// vfs.NewCrashableMem and vfs/errorfs exercise the whole store.
//
// # Catalog keys
//
// Keys start with one tag byte. Namespaces are length-prefixed, so no
// namespace's keys are a prefix of another's and a scan of one namespace
// never meets another's packets. Integers in keys are big endian so that
// they sort numerically.
//
//	'h' | ns len u16 BE | ns | packet id (32)                   -> framed format.PacketHeader
//	'i' | ns len u16 BE | ns | model fp (32) | packet id (32)   -> empty (List index)
//	'm' | model fp (32)                                         -> framed format.ModelSpec
//	'b' | blob file number u32 BE                               -> framed blob file record
//	's' | "next-blob"                                           -> framed u32 LE: next file number
//	'a' | name len u16 BE | name | model fp (32)                -> framed artifact ("KVAR", artifact.go)
//	'A' | model fp (32) | name                                  -> empty (ListArtifacts index)
//	'c' | ns len u16 BE | ns | name len u16 BE | name           -> framed SpanMeta ("KVSP", span_record.go)
//	'C' | ns | name (as for 'c') | layer u16 BE | head u16 BE   -> framed HeadMeta ("KVSP")
//	'p' | ns len u16 BE | ns | packet id (32)                   -> empty: pinned (capacity.go)
//	'x' | ns len u16 BE | ns | packet id (32)                   -> framed access statistics ("KVAC", access.go)
//
// Values are format records (format.Seal: magic, version, length, CRC32C).
// A blob file record (kind "KVBF") has a 40-byte little-endian body:
//
//	+-----------+-------------+--------------+-----------+----------+-----------+-----------+
//	| flags u32 | extents u32 | live ext u32 | reserved  | size u64 | live u64  | dead u64  |
//	| bit 0:    | ever        | not deleted  | u32, 0    | append   | bytes of  | bytes of  |
//	| sealed    | catalogued  |              |           | offset   | live ext. | deleted   |
//	+-----------+-------------+--------------+-----------+----------+-----------+-----------+
//	0           4             8              12          16         24          32        40
//
// and the sequence (kind "KVSQ") a 4-byte body, the next file number.
//
// size is the offset at which the next extent goes: the end of the last
// catalogued extent (or the 4 KiB blob header). It never decreases, so a
// deleted extent's bytes are never overwritten while a view may read them.
//
// # Blob files and extents
//
// A blob file is the 4 KiB format blob header followed by extents, each 4
// KiB aligned (see format/layout.go): one packet's chunks, layer-major, K then
// V, each ChunkAlignment aligned, zero padding, and a 64-byte trailer ending
// the extent. A packet stored pruned (Packet.Keep) has compacted K|V chunks,
// only its kept rows, and a positions chunk after the last V (pruned.go).
//
//	blobs/000001.blob
//	+-------------+----------------------------------+------------------+-----
//	| blob header | extent (packet a)                | extent (packet b)| ...
//	| 4 KiB       | L0 K | L0 V | L1 K | ... | pad|T | ...              |
//	+-------------+----------------------------------+------------------+-----
//	0             4096                                 (4 KiB aligned)
//
// Chunks are written straight from the caller's buffers with one positioned
// write each (vfs.File.WriteAt; never Write, which may scribble on its
// argument); their CRC32Cs are computed from the same buffers, on another
// goroutine while the writes proceed, and combined into the trailer's
// payload CRC without a second pass. Every few MiB the writer asks the OS to
// start writing back (sync_file_range through vfs.File.SyncTo), so that the
// device works while later chunks are copied and the final fdatasync is
// short.
//
// # Commit protocol
//
//	write extent at the file's size -> fdatasync the blob file
//	  (a new file: blob header written and the blobs/ directory synced first)
//	-> one Pebble batch: header, index entry, model spec if new, blob file
//	   record(s), next-blob sequence -> Commit(pebble.Sync) -> visible
//
// A crash before the batch commits leaves bytes past the recorded size that
// nothing references. On Open they are ignored and the next extent simply
// overwrites them (vfs.File has no truncate, and nothing needs it); a later
// garbage collector reclaims space. A header never points at bytes that were
// not synced, and a new extent never overwrites catalogued bytes.
//
// # Reads
//
// Get returns a View. On an OS file system (files with a real descriptor)
// blob files are mmapped read-only, whole, and the View's slices alias the
// mapping; on other file systems (vfs.MemFS, for tests) chunks are copied
// into the View on first use. Chunks are verified against their CRC32C the
// first time they are read (bloblog.CRC keeps that close to memory speed);
// the result is remembered per blob file while the store keeps it mapped,
// so a warm Get costs a catalog lookup and no byte reaches a caller
// unverified. Readers other than View use bloblog.File.Chunk: (file, chunk) ->
// verified bytes, aliasing the mapping when there is one (no allocation),
// read into a caller's buffer otherwise. A View holds a reference on its
// blob file: the file stays mapped (and, once compaction exists, on disk)
// until every View using it is released, even if the packet is deleted
// meanwhile or the DB closed.
//
// # Operations
//
// Verify (verify.go) reads every catalogued extent and checks each chunk's
// and span block's CRC32C and each trailer. Check (check.go) checks the
// catalog against the blob files without reading payloads and lists
// reclaimable space (Garbage) apart from inconsistencies (Finding).
// Compact (compact.go) rewrites mostly dead blob files into new ones and
// repoints the catalog in one synced batch (packet headers, and span
// memories' root and head records, whose block offsets are relative to
// their extent and so survive the move); GC (gc.go) removes what
// crashes leave and wholly dead files. A blob file leaves the catalog
// before it leaves the disk, and is removed only once no view maps it
// (bloblog.File.MarkObsolete), so every step is crash-safe. Options.MaxBytes
// evicts unpinned packets in LRU or LFU order (capacity.go) from access
// statistics kept in memory and saved lazily (access.go). Subscribe
// (events.go) streams packet events without ever blocking the store.
//
// # Concurrency
//
// A DB is safe for concurrent use. Writers (Put, Delete) are serialised on
// one mutex; readers run concurrently with them and with each other.
package store
