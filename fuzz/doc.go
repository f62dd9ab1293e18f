// Package fuzz holds the fuzz targets of kvstore's decoders, one FuzzXxx per
// decoder, each seeded with good and deliberately broken inputs. Seeds and
// any input that once failed live in testdata/fuzz/FuzzXxx/ and replay in a
// plain `go test ./fuzz`; to fuzz one target:
//
//	go test ./fuzz -run '^$' -fuzz '^FuzzDecodeHeader$' -fuzztime 60s
//
// Every target follows archive/zip's habit: whatever decodes must encode
// again and decode to an equal value, and nothing may panic. The package
// has no code of its own.
package fuzz
