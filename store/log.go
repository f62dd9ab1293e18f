package store

import "github.com/kvstore/kvstore/store/internal/maint"

// Notable events go to Options.Logger: Open's recovery facts, compaction,
// GC and eviction at Info, problems at Warn and Error. Per-request paths
// (Get, Put) do not log.

// logCompaction reports a compaction that did something.
func (db *DB) logCompaction(r *maint.CompactReport) {
	if len(r.Rewritten) == 0 && len(r.Skipped) == 0 {
		return
	}
	db.log.Info("store: compaction", "dir", db.dir, "rewritten", r.Rewritten, "created", r.Created,
		"extents", r.Extents, "copied_bytes", r.BytesCopied, "reclaimed_bytes", r.BytesReclaimed)
	for _, s := range r.Skipped {
		db.log.Warn("store: compaction skipped a blob file", "dir", db.dir, "file", s.Num, "reason", s.Reason)
	}
}

// logOpen reports what Open found: the blob files, their live and dead
// bytes, and bytes a crashed write left past the active file's catalogued
// size (the next write overwrites them).
func (db *DB) logOpen() {
	var live, dead uint64
	files := db.blobRecords()
	for _, f := range files {
		live, dead = live+f.LiveBytes, dead+f.DeadBytes
	}
	db.log.Info("store: opened", "dir", db.dir, "blob_files", len(files), "live_bytes", live, "dead_bytes", dead,
		"read_only", db.opts.ReadOnly)
	a := db.w.Cur
	if a == nil {
		return
	}
	if st, err := db.fs.Stat(a.Path); err == nil && uint64(st.Size()) > a.End {
		db.log.Info("store: recovery: the active blob file has bytes past its catalogued size, left by a write that did not commit; the next write overwrites them",
			"file", a.Path, "catalogued", a.End, "size", st.Size())
	}
}
