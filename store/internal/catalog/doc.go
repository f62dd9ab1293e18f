// Package catalog is the store's catalog: the Pebble database in
// DIR/catalog that keeps every small thing (headers, indexes, model specs,
// blob file records, artifacts, span memory records, pins, access
// statistics; never tensors), its keys and how they are built and parsed,
// the blob file record (BlobFile: the value under 'b', coded by
// format/blobrec.go), the FORMAT file beside it (formatfile.go), and the
// packet reads the store's Get, Has, Model, List and Headers make
// (records.go, list.go: header and model spec checked against their keys,
// List's pages of 'i' keys and their cursors).
//
// Keys start with one tag byte. Namespaces and names are length-prefixed,
// so no namespace's keys are a prefix of another's and a scan of one
// namespace never meets another's entries. Integers in keys are big endian
// so that they sort numerically.
//
//	'h' | ns len u16 BE | ns | packet id (32)                   -> framed packet header ("KVPH")
//	'i' | ns len u16 BE | ns | model fp (32) | packet id (32)   -> empty (List index)
//	'm' | model fp (32)                                         -> framed model spec ("KVMS")
//	'b' | blob file number u32 BE                               -> framed blob file record ("KVBF")
//	's' | "next-blob"                                           -> framed sequence ("KVSQ"): next file number
//	's' | "next-record"                                         -> framed record sequence ("KVRS"): next put record / tombstone seq
//	'a' | name len u16 BE | name | model fp (32)                -> framed artifact ("KVAR")
//	'A' | model fp (32) | name                                  -> empty (ListArtifacts index)
//	'c' | ns len u16 BE | ns | name len u16 BE | name           -> framed span memory root ("KVSP")
//	'C' | ns | name (as for 'c') | layer u16 BE | head u16 BE   -> framed span memory head ("KVSP")
//	'p' | ns len u16 BE | ns | packet id (32)                   -> empty: pinned
//	'x' | ns len u16 BE | ns | packet id (32)                   -> framed access statistics ("KVAC")
//
// The values' bytes are package format's (one file per record kind);
// docs/format.md draws them. Commits are synced (pebble.Sync), but for
// the batches of Put and Delete (CommitUnsynced): the blob log's synced put
// records and tombstones hold all they change, and Open's reconcile applies
// them again if a crash loses the batch. Pebble
// reports a failed WAL write through its Logger's Fatalf; the catalog's
// logger panics with a private value instead of exiting, and Commit and
// Close recover it into an error wrapping ErrFailed.
package catalog
