// Package store is the kvstore engine: it keeps KV-cache packets durable,
// finds them by id and hands their tensors back as zero-copy views.
//
// # Use
//
// A server opens one DB per store directory and shares it between
// goroutines, takes a Scope per (namespace, model), and on each request
// passes the request's context:
//
//	db, err := store.Open(dir, nil)         // creates the store; nil: default Options
//	defer db.Close()
//	docs, err := db.Scope("docs", spec)     // spec: the model's *format.ModelSpec
//	id, err := docs.Put(ctx, packet)        // a document's K and V per layer; durable on return
//	v, err := docs.Get(ctx, id)             // a View: chunks CRC-checked on first read
//	dst, err := docs.AssembleInto(ctx, items, store.DestShape{Layout: store.LayoutPaged, BlockSize: 16}, nil)
//
// Put is idempotent (a packet's id is its content address: namespace,
// model fingerprint, adapter and tokens). Assemble places several packets
// at new positions, re-rotating their keys, into a destination in the
// layout the attention kernel reads (contiguous HND, paged NHD, vLLM's
// paged layouts, llama.cpp's transposed V); AssembleInto allocates it.
// Span memory (PutSpanMemory, OpenSpanMemory) keeps a long context as
// anchors and SVD factors. Maintenance (Verify, Check, Compact, GC, Recover)
// takes (ctx, Options); Stats and Subscribe report; store/admin serves a
// live store as JSON and store/promstore as Prometheus metrics. Errors wrap
// the sentinels in errors.go. The runnable examples (Example,
// Example_server) show the whole flow.
//
// The rest of this comment is the engine's map.
//
// # Directory
//
//	DIR/
//	  FORMAT              magic + format version major.minor + crc (format.EncodeFormatFile);
//	  FORMAT.copy         the same 20 bytes (since 1.2): Open trusts a good copy, a
//	                      read-write Open rewrites a bad one and writes an older version
//	                      up to format.Current; both written last when a store is created;
//	                      newer majors are refused (store/internal/catalog reads and
//	                      writes them; formatfile.go, RecoverFormat)
//	  LOCK                held while the store is open: flock, exclusive for read-write
//	                      and shared for read-only opens on the OS's file system,
//	                      else vfs.FS.Lock (store/internal/lock)
//	  RESERVE             4 x CatalogMemTableSize + 1 MiB preallocated bytes (no content), released
//	                      by an Open on a full disk so that Delete and GC can run
//	                      (store/internal/space)
//	  catalog/            Pebble v2: every small thing, keys below
//	  blobs/NNNNNN.blob   append-only payload files, sealed at Options.BlobFileSize
//	                      (or a sixteenth of the disk, if smaller: space.go)
//
// Every file, blob files included, goes through Options.FS, so that
// vfs.NewCrashableMem and vfs/errorfs exercise the whole store.
//
// # Packages
//
// The root package is the public API and the engine's policy: Open and
// Close, Options, the errors, Put, Get and Views, List, Assemble,
// artifacts, span memory's DB calls, and maintenance's DB calls (Verify,
// Check, Compact, GC, Pin, capacity, events, stats). Each DB method admits
// the call (the gate, db.write or db.exclusive), hands the internal
// package the state it needs as explicit arguments or small interfaces
// (the catalog, the blobs/ directory, the blob file registry, counters),
// never the DB, and installs what it returns (registry, writer, stats,
// events). The public types (reports, options, findings, View,
// SpanReader, Dest, ...) are the root package's own, their fields
// documented there, converted from and to the internal packages' at the
// boundary (convert.go; alias_test.go refuses an exported alias of an
// internal type). It sits over internal packages, each one concept with its own tests, and
// over format, which owns every on-disk byte:
//
//	store/admin, promstore,  adapters over a DB: the admin http.Handler (JSON), the Prometheus
//	  gpusource              collector, the GPU prefetcher's byte source
//	store                    DB, Scope, Options, errors, Put/Get/View, Assemble, artifacts, span memory calls,
//	                         maintenance calls; write.go: the one writer preamble (db.write, db.exclusive);
//	                         reconcile.go and recover.go: Open's reconciliation and Recover admitted,
//	                         committed or refused, and installed
//	store/internal/maint     Verify, Check, Compaction (pick, copy, batch), PlanGC, and their execution
//	                         (Writer.Compact: groups committed one at a time; Writer.GC); the walk over
//	                         every catalogued extent (WalkRefs), extent regions and trailers, DiskFiles,
//	                         Debt; reads through maint.Store (catalog, FS, dir, Files registry
//	                         interface), changes through maint.Writer (Registry interface, commit)
//	store/internal/access    access statistics (sharded Table, Flush, Save, Load), eviction order
//	                         (Candidates, LRU/LFU), the room plan (Plan, Room), the eviction's
//	                         tombstones and batch (Evictor.Evict), pin records (SetPin, Pinned, Table.Pin)
//	store/internal/assemble  Assemble as data: Prepare (headers against the spec, keep-sets, positions,
//	                         dynamic RoPE) over opened chunk sources (Source: the root's views), Open
//	                         and Held (sources opened through the root's callbacks, held, released),
//	                         Run and RunInto (workers, layer
//	                         reports), the fills (contiguous, paged, transposed V, decoded, pruned) with
//	                         CRC32C while placing, Dest and its geometry checks and constructors
//	store/internal/view      View: a packet's chunks, mapped or copied, verified on first read, decoded
//	                         (Decode), a pruned packet's keep-set (Keep, DecodePositions), CopyChunk;
//	                         Source lends a view to assemble; Open (header lookup, file pin, retry)
//	store/internal/events    the packet event stream: Hub, generic over the store's Event (Subscribe,
//	                         Publish without blocking, drops counted)
//	store/internal/recovery  the catalog brought up to date with, or rebuilt from, the blob log's put
//	                         records and tombstones: Reconcile (load, scan, classify, repoint, apply,
//	                         account) into a Plan, Commit (one synced batch), GoneFiles; reads through
//	                         recovery.Store (catalog, FS, dir, the blob files on disk); Open's blob file
//	                         records and next file number (Files)
//	store/internal/packet    a packet as Put stores it: Desc (Packet's fields) checked against its spec
//	                         (Check), pruned (Compacted, keep-set, positions chunk), keys rotated to
//	                         local positions (Normalized), chunks encoded and laid out with room for
//	                         the put record (Encode), the extent written and its header (Write), the
//	                         tombstone extents (WriteTombstones), the catalog batch of a put or of
//	                         deletes (AddPut, AddDeletes: header, index, blob file records, sequences)
//	store/internal/artifact  artifact records: names and data checked, the KVAR record framed, parsed and
//	                         checked against its key (Read), read, listed and batched in the catalog,
//	                         a read's missing error (Missing)
//	store/internal/opstats   operation statistics: latency histograms (Hist, LatencyBuckets), fsync
//	                         counters (Sync, SyncBuckets), a histogram's snapshot (Latency)
//	store/internal/spandb    span memory's calls against the catalog and the blob log: Put (NewPut;
//	                         Prepare against the catalog; Write: extent, fdatasync, one synced batch,
//	                         blob file records), Delete, Open (a spanmem.Reader), List and Count;
//	                         reaches the store only through spandb.Store (catalog, Host interface)
//	store/internal/spanmem   span memory as data: Build (segmentation, summaries, W, factors,
//	                         resident rows) from artifacts given as inputs, Check, the extent
//	                         layout and its records (SetRecords), Routing (NewRouting, Score, Zoom),
//	                         verified block reads (Blocks), the reader (Reader: head records on first
//	                         use through Records, factors, resident rows, Routing)
//	store/internal/catalog   the Pebble catalog (open, in memory over the disk too, get, scan, synced
//	                         and unsynced commits, the background WAL sync (Syncer), fatal-error
//	                         guard), every catalog key, the blob file record (BlobFile), the FORMAT
//	                         file, packet headers, model specs, List pages and the Headers walk,
//	                         Open's directory checks (RequireStore, PrepareDir)
//	store/internal/bloblog   blob files and extents: append (Writer, WriteExtent, pwritev, writeback,
//	                         WriteRecordExtent), Scan (whole extents found without the catalog),
//	                         read (File: refs, mmap, copies, verified-chunk cache, Chunk, ChunkError),
//	                         CRC32C combine and streaming, read-ahead advice
//	store/internal/space     the disk space reserve (Reserve: Release, Restore, Hold), ErrNoSpace and
//	                         NoSpace (which errors a full disk caused)
//	store/internal/gate      the calls in flight (Gate: Enter, Leave, Close waits for them)
//	store/internal/lock      DIR/LOCK: flock, shared for read-only holders, or FS.Lock (Dir, NoLockFS)
//	store/internal/cowfs     a file system that reads a base and keeps every change in memory (the
//	                         catalog of a read-only store reconciled after a crash)
//	format                   every record's bytes: KVPH, KVMS, KVBF, KVSQ, KVAC, KVAR, KVSP, KVSF,
//	                         KVKS, KVPR, KVTS, KVRS, the positions bitmap, FORMAT, blob header, trailer
//
// Floors, top to bottom: gpusource, promstore and admin (adapters over the
// store); store; maint, access, assemble, view, events, recovery, packet,
// artifact, opstats and spandb; spanmem; catalog; bloblog; space, gate,
// lock and cowfs; format and the module's other packages. A package imports only
// floors below its own (TestFloors checks it with go list):
// format knows nothing of the store, and the internal packages know
// nothing of DB.
//
// # Catalog keys
//
// The key layout is drawn in store/internal/catalog (doc.go) and, with
// every value's bytes, in docs/format.md. Blob file records ("KVBF") and
// the next-blob sequence ("KVSQ") are coded in format/blobrec.go. A blob
// file record's size is the offset at which the next extent goes: the end
// of the last catalogued extent (or the 4 KiB blob header). It never decreases, so a
// deleted extent's bytes are never overwritten while a view may read them.
//
// # Blob files and extents
//
// A blob file is the 4 KiB format blob header followed by extents, each 4
// KiB aligned (see format/layout.go): one packet's chunks, layer-major, K then
// V, each ChunkAlignment aligned, zero padding, and a 64-byte trailer ending
// the extent. A packet stored pruned (Packet.Keep) has compacted K|V chunks,
// only its kept rows, and a positions chunk after the last V (drawn in
// store/internal/packet).
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
//	   record(s), next-blob and next-record sequences
//	   -> CommitUnsynced (pebble.NoSync) -> visible, acknowledged
//
// The extent's fdatasync is Put's one device flush, and its durability
// point: the put record leading the extent holds every catalog entry the
// batch writes, so the blob log, not the catalog's WAL, is the log of
// record (docs/decisions.md). The batch is durable once a later synced
// commit (span memories, artifacts, compaction, GC) or Close syncs the
// catalog's WAL, which covers every batch before it. A crash that loses it
// leaves a synced put record past the blob file's recorded size, and Open's
// reconcile (reconcile.go) applies it again before the store serves. A
// crash before the fdatasync leaves bytes past the recorded size that are
// not a whole extent: reconcile ignores them, the next extent overwrites
// them (vfs.File has no truncate, and nothing needs it). A header never
// points at bytes that were not synced, and a new extent never overwrites
// catalogued bytes. Delete and eviction commit the same way behind their
// synced tombstones; batches that no blob-log record holds (span memories,
// artifacts, compaction, GC, reconcile's own) are committed with
// pebble.Sync.
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
// Verify (store/internal/maint/verify.go) reads every catalogued extent
// and checks each chunk's and span block's CRC32C and each trailer. Check
// (maint/check.go) checks the catalog against the blob files without
// reading payloads and lists reclaimable space (Garbage) apart from
// inconsistencies (Finding). Compact (maint/compact.go, run by
// maint.Writer through the root's registry) rewrites mostly dead blob files into new ones and
// repoints the catalog in one synced batch (packet headers, and span
// memories' root and head records, whose block offsets are relative to
// their extent and so survive the move); GC (maint.PlanGC, carried out by
// maint.Writer.GC) removes what crashes leave and wholly dead files. A blob file leaves the catalog
// before it leaves the disk, and is removed only once no view maps it
// (bloblog.File.MarkObsolete), so every step is crash-safe. Options.MaxBytes
// evicts unpinned packets in LRU or LFU order (capacity.go) from access
// statistics kept in memory and saved lazily (store/internal/access). Subscribe
// (events.go) streams packet events without ever blocking the store.
//
// # Concurrency
//
// A DB is safe for concurrent use. Writers (Put, Delete) are serialised on
// one mutex; readers run concurrently with them and with each other.
package store
