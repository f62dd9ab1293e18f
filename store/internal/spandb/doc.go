// Package spandb carries out the store's span memory calls against the
// catalog and the blob log: a put (the extent appended to the active blob
// file and fdatasynced, then one synced batch of records), a delete, the
// opening of a reader, and the walk over every stored memory. Span memory
// as data (Memory, its extent layout and records, Reader, Routing) is
// store/internal/spanmem's; this package is where those records meet the
// catalog.
//
// It takes what it touches through Store: the catalog, the store's
// sentinels, counters, and the Host interface for the rest (the gate, the
// blob file registry and records, the model specs, the synced commit, the
// SeKV artifacts). It never sees the store's DB and takes no lock:
// store.DB admits each call, holds the writer lock for Write and Delete,
// prepares the active blob file (bloblog.Writer), and installs what they
// return (blob file records, the span memory count, the model spec).
//
// A put commits, in one synced Pebble batch after the extent is synced:
//
//	'c' | ns | name                 -> root record, "KVSP" (format.SpanMeta)
//	'C' | ns | name | layer | head  -> one head record per (layer, KV head), "KVSP"
//	                                   (format.HeadMeta); a replaced memory's
//	                                   head records deleted first
//	'm' | model                     -> model spec, if not yet catalogued
//	'a' | name | model, 'A' | ...   -> the W Build fitted (ProjectionRef.Fitted),
//	                                   unless stored already, "KVAR" (format/artifact.go)
//	'b' | num                       -> blob file records, "KVBF" (format/blobrec.go):
//	                                   the active file grown, files sealed since
//	                                   the last batch, a replaced extent dead
//	's' | "next-blob"               -> "KVSQ", for a new blob file
//
// A delete removes the root and head records and writes the blob file
// record with the extent dead, in one synced batch. The keys are drawn in
// store/internal/catalog (keys.go) and every value's bytes in
// docs/format.md; the extent's layout is spanmem.Extent's.
package spandb
