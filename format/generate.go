package format

// The FlatBuffers code in fb/ is generated from schema/kvstore.fbs by flatc
// 2.0.8 and checked in; never edit it by hand. After changing the schema,
// regenerate it and update the field tables in verify.go.
//
//go:generate flatc --go -o . --go-namespace fb schema/kvstore.fbs
