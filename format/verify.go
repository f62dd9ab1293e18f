package format

import (
	"encoding/binary"
	"fmt"
)

// The Go FlatBuffers runtime trusts its input: a bad offset makes a
// generated accessor panic or read the wrong bytes. verifyBuffer checks a
// whole buffer against a description of our schema before any accessor
// runs, as the C++ runtime's Verifier does:
//
//   - the root offset, and every offset after it, is non-zero, below 2^31 and
//     lands inside the buffer;
//   - every table's vtable lies inside the buffer, is 2-aligned and has an
//     even size >= 4; the table's inline size is >= 4 and inside the buffer;
//   - every present field lies inside its table's inline bytes (never on the
//     vtable offset) and is aligned to its size;
//   - every enum field holds a declared value;
//   - every string has its length, bytes and NUL terminator inside the
//     buffer; every vector its count and elements (checked arithmetic);
//   - nested tables and vectors of tables are verified in turn, at most
//     maxVerifyDepth deep and at most one table per 4 buffer bytes.
//
// Fields beyond the ones described (written by a newer minor version) are
// ignored, as the generated accessors ignore them.

// maxVerifyDepth bounds table nesting; our schema nests two deep.
const maxVerifyDepth = 8

// maxBufferSize is FlatBuffers' own limit: offsets are below 2^31.
const maxBufferSize = 1<<31 - 1

// fieldType is the wire shape of a field.
type fieldType uint8

const (
	ftScalar      fieldType = iota // size bytes inline
	ftEnum                         // one byte inline, at most max
	ftStruct                       // size bytes inline, 8-aligned
	ftString                       // offset to a NUL-terminated byte vector
	ftVector                       // offset to a vector of size-byte scalars
	ftTable                        // offset to a table
	ftTableVector                  // offset to a vector of offsets to tables
)

// fieldSpec describes the field in one vtable slot.
type fieldSpec struct {
	name  string
	typ   fieldType
	size  uint32     // inline size of a scalar or struct; element size of a vector
	max   uint8      // ftEnum: the largest declared value
	table *tableSpec // ftTable, ftTableVector
	path  string     // "Table.field", for errors; set by newTable
}

// tableSpec describes a table: fields[i] is the field in vtable slot i,
// that is, the i-th field declared in schema/kvstore.fbs.
type tableSpec struct {
	name   string
	fields []fieldSpec
}

// newTable returns a tableSpec with its fields' error paths filled in, so
// that the verifier builds no strings unless it fails.
func newTable(name string, fields ...fieldSpec) *tableSpec {
	for i := range fields {
		fields[i].path = name + "." + fields[i].name
	}
	return &tableSpec{name: name, fields: fields}
}

func scalar(name string, size uint32) fieldSpec {
	return fieldSpec{name: name, typ: ftScalar, size: size}
}
func enum(name string, max uint8) fieldSpec {
	return fieldSpec{name: name, typ: ftEnum, size: 1, max: max}
}
func str(name string) fieldSpec { return fieldSpec{name: name, typ: ftString} }

// The schema, slot by slot. TestVerifierMatchesSchema checks these against
// schema/kvstore.fbs.
var (
	ropeTable = newTable("Rope",
		enum("style", uint8(RoPEInterleaved)),
		scalar("rotary_dims", 4),
		scalar("theta", 8),
		enum("scaling", uint8(RoPEScalingDynamic)),
		scalar("factor", 8),
		scalar("low_freq_factor", 8),
		scalar("high_freq_factor", 8),
		scalar("original_max_pos", 8),
		scalar("beta_fast", 8),
		scalar("beta_slow", 8),
		scalar("attention_factor", 8),
		scalar("yarn_no_truncate", 1),
		scalar("mscale", 8),
		scalar("mscale_all_dim", 8),
	)
	modelSpecTable = newTable("ModelSpec",
		str("architecture"),
		scalar("layers", 4),
		scalar("kv_heads", 4),
		scalar("head_dim", 4),
		enum("dtype", uint8(DTypeU8)),
		fieldSpec{name: "rope", typ: ftTable, table: ropeTable},
		str("weights_id"),
	)
	chunkTable = newTable("Chunk",
		scalar("layer", 4),
		enum("kind", uint8(ChunkPositions)),
		enum("dtype", uint8(DTypeU8)),
		fieldSpec{name: "shape", typ: ftVector, size: 4},
		enum("codec", uint8(CodecLowRank)),
		scalar("blob_file", 4),
		scalar("offset", 8),
		scalar("length", 8),
		scalar("raw_length", 8),
		scalar("crc32c", 4),
	)
	headerTable = newTable("PacketHeader",
		scalar("version", 2),
		str("namespace"),
		fieldSpec{name: "id", typ: ftStruct, size: 32},
		fieldSpec{name: "model", typ: ftStruct, size: 32},
		str("adapter_id"),
		scalar("header_tokens", 4),
		scalar("trailer_tokens", 4),
		scalar("tokens", 4),
		fieldSpec{name: "token_ids", typ: ftVector, size: 4},
		scalar("base_position", 8),
		scalar("layers", 4),
		scalar("kv_heads", 4),
		scalar("head_dim", 4),
		enum("dtype", uint8(DTypeU8)),
		scalar("blob_file", 4),
		scalar("extent_offset", 8),
		scalar("extent_length", 8),
		scalar("created_unix_ns", 8),
		fieldSpec{name: "chunks", typ: ftTableVector, table: chunkTable},
		scalar("kept_tokens", 4),
	)
)

// verifier walks one buffer.
type verifier struct {
	buf    []byte
	tables int // tables left to visit
}

// verifyBuffer checks that buf is a well-formed FlatBuffer whose root is a
// table of shape root. Errors wrap ErrCorruption and name the field.
func verifyBuffer(buf []byte, root *tableSpec) error {
	if len(buf) < 8 || len(buf) > maxBufferSize {
		return fmt.Errorf("%w: %s: flatbuffer of %d bytes", ErrCorruption, root.name, len(buf))
	}
	v := verifier{buf: buf, tables: len(buf)/4 + 1}
	pos, err := v.offset(0, root.name)
	if err != nil {
		return err
	}
	return v.table(pos, root, 1)
}

func (v *verifier) fail(where, format string, args ...any) error {
	return fmt.Errorf("%w: flatbuffer %s: %s", ErrCorruption, where, fmt.Sprintf(format, args...))
}

// in reports whether [pos, pos+n) lies inside the buffer.
func (v *verifier) in(pos, n uint64) bool {
	return pos <= uint64(len(v.buf)) && n <= uint64(len(v.buf))-pos
}

func (v *verifier) u16(pos uint64) uint64 { return uint64(binary.LittleEndian.Uint16(v.buf[pos:])) }
func (v *verifier) u32(pos uint64) uint64 { return uint64(binary.LittleEndian.Uint32(v.buf[pos:])) }

// offset follows the uoffset stored at pos, which must be 4-aligned and
// inside the buffer, and returns its target.
func (v *verifier) offset(pos uint64, where string) (uint64, error) {
	if pos%4 != 0 || !v.in(pos, 4) {
		return 0, v.fail(where, "offset at %d misaligned or outside %d bytes", pos, len(v.buf))
	}
	o := v.u32(pos)
	if o == 0 || o >= 1<<31 || !v.in(pos+o, 1) {
		return 0, v.fail(where, "offset %d at %d points outside %d bytes", o, pos, len(v.buf))
	}
	return pos + o, nil
}

// table verifies the table at pos and everything it refers to.
func (v *verifier) table(pos uint64, t *tableSpec, depth int) error {
	if depth > maxVerifyDepth {
		return v.fail(t.name, "nested deeper than %d", maxVerifyDepth)
	}
	if v.tables--; v.tables < 0 {
		return v.fail(t.name, "more tables than the buffer can hold")
	}
	if pos%4 != 0 || !v.in(pos, 4) {
		return v.fail(t.name, "table at %d misaligned or outside %d bytes", pos, len(v.buf))
	}
	vt := int64(pos) - int64(int32(v.u32(pos)))
	if vt < 0 || vt%2 != 0 || !v.in(uint64(vt), 4) {
		return v.fail(t.name, "vtable at %d (table at %d) misaligned or outside %d bytes", vt, pos, len(v.buf))
	}
	vtSize, tSize := v.u16(uint64(vt)), v.u16(uint64(vt)+2)
	if vtSize < 4 || vtSize%2 != 0 || !v.in(uint64(vt), vtSize) {
		return v.fail(t.name, "vtable at %d: size %d bad or outside %d bytes", vt, vtSize, len(v.buf))
	}
	if tSize < 4 || !v.in(pos, tSize) {
		return v.fail(t.name, "table at %d: size %d bad or outside %d bytes", pos, tSize, len(v.buf))
	}
	for i := range t.fields {
		slot := 4 + 2*uint64(i)
		if slot+2 > vtSize {
			break // absent: older writer
		}
		fo := v.u16(uint64(vt) + slot)
		if fo == 0 {
			continue
		}
		if err := v.field(pos, tSize, fo, t, &t.fields[i], depth); err != nil {
			return err
		}
	}
	return nil
}

// field verifies a present field at table offset fo.
func (v *verifier) field(pos, tSize, fo uint64, t *tableSpec, f *fieldSpec, depth int) error {
	where := f.path
	if where == "" {
		where = f.name
	}
	size, align := f.size, f.size
	switch f.typ {
	case ftStruct:
		align = 8
	case ftString, ftVector, ftTable, ftTableVector:
		size, align = 4, 4
	}
	p := pos + fo
	if fo < 4 || fo+uint64(size) > tSize || p%uint64(align) != 0 {
		return v.fail(where, "field at table offset %d (size %d, table size %d, position %d) out of table or misaligned", fo, size, tSize, p)
	}
	switch f.typ {
	case ftEnum:
		if b := v.buf[p]; b > f.max {
			return v.fail(where, "enum value %d at %d not declared (max %d)", b, p, f.max)
		}
	case ftString:
		return v.string(p, where)
	case ftVector:
		_, _, err := v.vector(p, uint64(f.size), where)
		return err
	case ftTable:
		sub, err := v.offset(p, where)
		if err != nil {
			return err
		}
		return v.table(sub, f.table, depth+1)
	case ftTableVector:
		return v.tableVector(p, f.table, where, depth)
	}
	return nil
}

// vector verifies the vector whose offset is stored at p and returns the
// position of its first element and its length.
func (v *verifier) vector(p, elem uint64, where string) (start, n uint64, err error) {
	vp, err := v.offset(p, where)
	if err != nil {
		return 0, 0, err
	}
	if vp%4 != 0 || !v.in(vp, 4) {
		return 0, 0, v.fail(where, "vector at %d misaligned or outside %d bytes", vp, len(v.buf))
	}
	n = v.u32(vp)
	if !v.in(vp+4, n*elem) { // n < 2^32, elem <= 8: no overflow
		return 0, 0, v.fail(where, "vector at %d: %d elements of %d bytes overrun %d bytes", vp, n, elem, len(v.buf))
	}
	return vp + 4, n, nil
}

// string verifies the string whose offset is stored at p.
func (v *verifier) string(p uint64, where string) error {
	start, n, err := v.vector(p, 1, where)
	if err != nil {
		return err
	}
	if !v.in(start+n, 1) || v.buf[start+n] != 0 {
		return v.fail(where, "string at %d of %d bytes lacks its NUL terminator", start-4, n)
	}
	return nil
}

// tableVector verifies a vector of tables whose offset is stored at p.
func (v *verifier) tableVector(p uint64, t *tableSpec, where string, depth int) error {
	start, n, err := v.vector(p, 4, where)
	if err != nil {
		return err
	}
	for i := uint64(0); i < n; i++ {
		sub, err := v.offset(start+4*i, where)
		if err != nil {
			return err
		}
		if err := v.table(sub, t, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// slot returns the vtable slot of the named field; it panics on a name not
// in the table, a bug in this package.
func (t *tableSpec) slot(name string) int {
	for i := range t.fields {
		if t.fields[i].name == name {
			return i
		}
	}
	panic("format: table " + t.name + " has no field " + name)
}
