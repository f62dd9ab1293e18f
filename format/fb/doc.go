// Package fb is the FlatBuffers code flatc 2.0.8 generates from
// ../schema/kvstore.fbs (run `go generate ./format`). Every other file here
// is generated; never edit them by hand.
//
// The accessors trust their input: on a corrupt buffer they panic or read
// the wrong bytes. Use format.DecodeHeader and format.DecodeModelSpec,
// which verify a buffer before any accessor runs, never GetRootAs* on bytes
// that did not come from a builder in this process.
package fb
