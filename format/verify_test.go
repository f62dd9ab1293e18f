package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

// schemaDecl is one field as schema/kvstore.fbs declares it.
type schemaDecl struct{ name, typ string }

// parseSchema reads the tables and enums of schema/kvstore.fbs with just
// enough of a parser for our file: `table|struct|enum Name ... { ... }`.
func parseSchema(t *testing.T) (tables map[string][]schemaDecl, enums map[string]int) {
	t.Helper()
	src, err := os.ReadFile("schema/kvstore.fbs")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(src), "\n") {
		l, _, _ = strings.Cut(l, "//")
		lines = append(lines, l)
	}
	text := strings.Join(lines, "\n")
	tables, enums = map[string][]schemaDecl{}, map[string]int{}
	block := regexp.MustCompile(`(table|struct|enum)\s+(\w+)[^{]*\{([^}]*)\}`)
	field := regexp.MustCompile(`(\w+)\s*:\s*([\w\[\]]+)\s*;`)
	for _, m := range block.FindAllStringSubmatch(text, -1) {
		switch m[1] {
		case "enum":
			enums[m[2]] = strings.Count(m[3], "=") - 1 // values are 0..n-1
		default:
			for _, f := range field.FindAllStringSubmatch(m[3], -1) {
				tables[m[2]] = append(tables[m[2]], schemaDecl{f[1], f[2]})
			}
		}
	}
	return tables, enums
}

// TestVerifierMatchesSchema keeps verify.go's field tables in step with the
// schema flatc generates from: same fields, same slots, same wire types.
func TestVerifierMatchesSchema(t *testing.T) {
	decls, enums := parseSchema(t)
	if len(decls["Hash256"]) != 4 {
		t.Fatalf("Hash256 has %d fields, want 4 ulongs (32 bytes)", len(decls["Hash256"]))
	}
	scalarSize := map[string]uint32{"ubyte": 1, "ushort": 2, "uint": 4, "int": 4, "ulong": 8, "long": 8, "double": 8}
	for _, spec := range []*tableSpec{ropeTable, modelSpecTable, chunkTable, headerTable} {
		t.Run(spec.name, func(t *testing.T) {
			d := decls[spec.name]
			if len(d) != len(spec.fields) {
				t.Errorf("%s: schema has %d fields, verifier %d", spec.name, len(d), len(spec.fields))
				return
			}
			for i, f := range spec.fields {
				want := fieldSpec{name: d[i].name}
				switch typ := d[i].typ; {
				case typ == "string":
					want.typ = ftString
				case typ == "Hash256":
					want.typ, want.size = ftStruct, 32
				case scalarSize[typ] != 0:
					want.typ, want.size = ftScalar, scalarSize[typ]
				case strings.HasPrefix(typ, "[") && scalarSize[strings.Trim(typ, "[]")] != 0:
					want.typ, want.size = ftVector, scalarSize[strings.Trim(typ, "[]")]
				case strings.HasPrefix(typ, "["):
					want.typ = ftTableVector
				case decls[typ] != nil:
					want.typ = ftTable
				default:
					n, ok := enums[typ]
					if !ok {
						t.Fatalf("%s.%s: unknown type %s", spec.name, d[i].name, typ)
					}
					want.typ, want.size, want.max = ftEnum, 1, uint8(n)
				}
				if f.name != want.name || f.typ != want.typ || f.size != want.size || f.max != want.max {
					t.Errorf("%s slot %d: verifier has %+v, schema says %s:%s", spec.name, i, f, d[i].name, d[i].typ)
				}
			}
		})
	}
}

// craft is a hand-made FlatBuffer: a root offset, a vtable and a table.
//
//	0: root uoffset -> 12
//	4: vtable: vtSize, tSize, slot 0 .. (2 slots)
//	12: table: soffset 8 (vtable at 4), then 8 bytes of fields
func craft(vtSize, tSize, slot0, slot1 uint16, fields []byte) []byte {
	b := make([]byte, 12, 64)
	binary.LittleEndian.PutUint32(b[0:], 12)
	binary.LittleEndian.PutUint16(b[4:], vtSize)
	binary.LittleEndian.PutUint16(b[6:], tSize)
	binary.LittleEndian.PutUint16(b[8:], slot0)
	binary.LittleEndian.PutUint16(b[10:], slot1)
	b = binary.LittleEndian.AppendUint32(b, 8)
	return append(b, fields...)
}

// A two-field table: an enum (max 2) and a string.
var craftTable = &tableSpec{name: "T", fields: []fieldSpec{enum("e", 2), str("s")}}

func TestVerifierHostile(t *testing.T) {
	str := func(n uint32, tail ...byte) []byte { // string at table offset 8
		b := []byte{1, 0, 0, 0, 4, 0, 0, 0}
		b = binary.LittleEndian.AppendUint32(b, n)
		return append(b, tail...)
	}
	good := craft(8, 12, 4, 8, str(2, 'h', 'i', 0, 0))
	if err := verifyBuffer(good, craftTable); err != nil {
		t.Fatalf("good buffer: %v", err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"too short", good[:7]},
		{"root offset zero", append([]byte{0, 0, 0, 0}, good[4:]...)},
		{"root beyond end", append([]byte{0xf0, 0, 0, 0}, good[4:]...)},
		{"root misaligned", append([]byte{13, 0, 0, 0}, good[4:]...)},
		{"root offset huge", append([]byte{0xfc, 0xff, 0xff, 0xff}, good[4:]...)},
		{"vtable before buffer", func() []byte { b := bytes.Clone(good); b[12] = 0x40; return b }()},
		{"vtable after buffer", func() []byte { b := bytes.Clone(good); copy(b[12:], []byte{0, 0, 0, 0x80}); return b }()},
		{"vtable misaligned", func() []byte { b := bytes.Clone(good); b[12] = 7; return b }()},
		{"vtable size odd", craft(7, 12, 4, 8, str(2, 'h', 'i', 0, 0))},
		{"vtable size small", craft(2, 12, 4, 8, str(2, 'h', 'i', 0, 0))},
		{"vtable size huge", craft(0xfffe, 12, 4, 8, str(2, 'h', 'i', 0, 0))},
		{"table size small", craft(8, 2, 4, 8, str(2, 'h', 'i', 0, 0))},
		{"table size huge", craft(8, 0xffff, 4, 8, str(2, 'h', 'i', 0, 0))},
		{"field on soffset", craft(8, 12, 0, 2, str(2, 'h', 'i', 0, 0))},
		{"field past table", craft(8, 8, 4, 8, str(2, 'h', 'i', 0, 0))},
		{"offset misaligned", craft(8, 12, 4, 6, str(2, 'h', 'i', 0, 0))},
		{"enum undeclared", craft(8, 12, 4, 8, append([]byte{3}, str(2, 'h', 'i', 0, 0)[1:]...))},
		{"string past end", craft(8, 12, 4, 8, str(200, 'h', 'i', 0, 0))},
		{"string length wraps", craft(8, 12, 4, 8, str(0xffffffff, 'h', 'i', 0, 0))},
		{"string without NUL", craft(8, 12, 4, 8, str(2, 'h', 'i', 'x', 0))},
		{"string header cut", craft(8, 12, 4, 8, str(2)[:10])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := verifyBuffer(tc.b, craftTable); !errors.Is(err, ErrCorruption) {
				t.Fatalf("verifyBuffer = %v, want ErrCorruption", err)
			}
		})
	}
}

// chain builds k tables of a recursive type Node{a: Node; b: Node}, each
// pointing at the next (through b too if both), and a last empty one.
//
//	0: root -> 16    4: vtable {8, 12, 4, 8|0}    12: vtable {4, 4}
//	16 + 12i: node i {soffset, a, b}               16 + 12k: last node
func chain(k int, both bool) []byte {
	b := make([]byte, 20+12*k)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 16)
	le.PutUint16(b[4:], 8)
	le.PutUint16(b[6:], 12)
	le.PutUint16(b[8:], 4)
	if both {
		le.PutUint16(b[10:], 8)
	}
	le.PutUint16(b[12:], 4)
	le.PutUint16(b[14:], 4)
	for i := 0; i < k; i++ {
		pos := 16 + 12*i
		next := pos + 12
		le.PutUint32(b[pos:], uint32(pos-4))
		le.PutUint32(b[pos+4:], uint32(next-pos-4))
		le.PutUint32(b[pos+8:], uint32(next-pos-8))
	}
	le.PutUint32(b[16+12*k:], uint32(16+12*k-12))
	return b
}

func TestVerifierDepthAndTableBudget(t *testing.T) {
	node := &tableSpec{name: "Node"}
	node.fields = []fieldSpec{{name: "a", typ: ftTable, table: node}, {name: "b", typ: ftTable, table: node}}
	if err := verifyBuffer(chain(maxVerifyDepth-1, false), node); err != nil {
		t.Fatalf("%d nested tables: %v", maxVerifyDepth, err)
	}
	if err := verifyBuffer(chain(maxVerifyDepth, false), node); !errors.Is(err, ErrCorruption) {
		t.Fatalf("%d nested tables: %v, want ErrCorruption", maxVerifyDepth+1, err)
	}
	// Two fields sharing each child: 2^8 visits in 104 bytes.
	if err := verifyBuffer(chain(maxVerifyDepth-1, true), node); err == nil || !strings.Contains(err.Error(), "more tables") {
		t.Fatalf("exponential sharing: %v, want the table budget to stop it", err)
	}
}
