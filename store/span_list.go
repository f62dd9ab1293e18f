package store

import "github.com/kvstore/kvstore/store/internal/spandb"

// SpanMemoryInfo describes one stored span memory as its root record
// says, without reading its head records or its extent.
type SpanMemoryInfo = spandb.Info

// SpanMemories calls fn with every stored span memory, in catalog order
// (namespace, then name), stopping at the first error fn returns, which
// it returns. A root record that does not decode, or whose key does not
// name its context, stops the walk with ErrCorruption naming the key. It is
// meant for tools (ls, inspect); OpenSpanMemory reads a memory's heads.
func (db *DB) SpanMemories(fn func(SpanMemoryInfo) error) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	return spandb.List(db.cat, fn)
}

// loadSpanCount counts the catalogued span memories at Open, for Stats.
func (db *DB) loadSpanCount() error {
	n, err := spandb.Count(db.cat)
	if err != nil {
		return err
	}
	db.st.spanMemories.Store(n)
	return nil
}

// setSpanRecords installs records that a committed span memory batch
// wrote and moves the span memory count by delta under the same lock, so
// that Stats never sees the one without the other.
func (db *DB) setSpanRecords(delta int64, rs ...BlobFileInfo) {
	db.filesMu.Lock()
	defer db.filesMu.Unlock()
	db.st.spanMemories.Add(delta)
	for _, r := range rs {
		r.Path = db.files[r.Num].Path()
		db.recs[r.Num] = r
	}
}
