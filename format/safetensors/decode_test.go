package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// file builds a safetensors file from a raw JSON header and buffer.
func file(header string, buf []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), buf...)
}

func TestDecodeGood(t *testing.T) {
	b := file(`{"__metadata__":{"a":"b"},"y":{"dtype":"F32","shape":[1],"data_offsets":[6,10]},`+
		`"x":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]},"z":{"dtype":"I64","shape":[0,5],"data_offsets":[10,10]}}  `,
		[]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 3 || f.Tensors[0].Name != "x" || f.Tensors[1].Name != "y" || f.Tensors[2].Name != "z" {
		t.Fatalf("tensors not in offset order: %+v", f.Tensors)
	}
	if !bytes.Equal(f.Tensor("y").Data, []byte{7, 8, 9, 10}) || f.Metadata["a"] != "b" || f.Tensor("nope") != nil {
		t.Fatalf("decoded %+v", f)
	}
	again, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	if (8+int(binary.LittleEndian.Uint64(again)))%8 != 0 {
		t.Fatalf("buffer not 8-byte aligned")
	}
	g, err := Decode(again)
	if err != nil {
		t.Fatal(err)
	}
	if !equalFiles(f, g) {
		t.Fatalf("re-encoded file differs: %+v vs %+v", f, g)
	}
	// Read takes the same path through a ReaderAt.
	h, err := Read(bytes.NewReader(b), int64(len(b)))
	if err != nil || !equalFiles(f, h) {
		t.Fatalf("Read: %v, %+v", err, h)
	}
	// A file with no tensor bytes: a ReaderAt may answer io.EOF to the
	// empty read at its end.
	empty := file(`{"__metadata__":{"a":"b"}}`, nil)
	if h, err := Read(bytes.NewReader(empty), int64(len(empty))); err != nil || h.Metadata["a"] != "b" {
		t.Fatalf("Read of a file without tensor bytes: %v, %+v", err, h)
	}
}

func TestDecodeBad(t *testing.T) {
	ten := make([]byte, 10)
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint64(huge, MaxHeaderSize+1)
	for _, tc := range []struct {
		name, want string
		b          []byte
	}{
		{"short", "too short", []byte{1, 2, 3}},
		{"header over cap", "exceeds the limit", append(huge, "{}"...)},
		{"header past end", "exceeds the", file(`{}`, nil)[:9]},
		{"not utf8", "UTF-8", file("{\"\xff\":1}", nil)},
		{"not object", "start with '{'", file(`[]`, nil)},
		{"bad json", `"x"`, file(`{"x":`, nil)},
		{"trailing", "after the JSON", file(`{} x`, nil)},
		{"duplicate", "duplicate", file(`{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, ten[:2])},
		{"unknown dtype", "unknown dtype", file(`{"x":{"dtype":"F4","shape":[1],"data_offsets":[0,1]}}`, ten[:1])},
		{"unknown field", "unknown field", file(`{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}}`, ten[:1])},
		{"missing field", "required", file(`{"x":{"dtype":"U8","shape":[1]}}`, ten[:1])},
		{"negative dim", "tensor", file(`{"x":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}`, ten[:1])},
		{"length mismatch", "data_offsets give", file(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, ten[:4])},
		{"overflow", "overflows", file(`{"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, nil)},
		{"gap", "contiguous", file(`{"x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, ten[:2])},
		{"overlap", "contiguous", file(`{"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"y":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`, ten[:3])},
		{"short buffer", "cover", file(`{"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, ten[:3])},
		{"reversed offsets", "begin <= end", file(`{"x":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}`, nil)},
		{"metadata not strings", "__metadata__", file(`{"__metadata__":{"a":1}}`, nil)},
		{"metadata not object", "not an object", file(`{"__metadata__":["a"]}`, nil)},
		{"metadata duplicate key", "duplicate key", file(`{"__metadata__":{"a":"1","b":"2","a":"3"}}`, nil)},
		{"metadata twice", "duplicate entry", file(`{"__metadata__":{"a":"1"},"__metadata__":{"b":"2"}}`, nil)},
		{"metadata too many keys", "more than", file(manyKeys(MaxMetadataEntries+1), nil)},
		{"tensors too many", "more than", file(manyTensors(MaxTensors+1), nil)},
		{"rank too high", "rank", file(`{"x":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}}`, ten[:1])},
		{"three offsets", "more than 2", file(`{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1,1]}}`, ten[:1])},
		{"one offset", "want [begin, end]", file(`{"x":{"dtype":"U8","shape":[0],"data_offsets":[0]}}`, nil)},
		{"field twice", "given twice", file(`{"x":{"dtype":"U8","shape":[1],"dtype":"U8","data_offsets":[0,1]}}`, ten[:1])},
		{"fraction", "unsigned integer", file(`{"x":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}`, ten[:1])},
		{"exponent", "unsigned integer", file(`{"x":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}}`, ten[:1])},
		{"leading zero", "leading zero", file(`{"x":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}}`, ten[:1])},
		{"offset overflows", "overflows", file(`{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551616]}}`, ten[:1])},
		{"dtype not string", "dtype", file(`{"x":{"dtype":7,"shape":[1],"data_offsets":[0,1]}}`, ten[:1])},
		{"shape not array", "shape", file(`{"x":{"dtype":"U8","shape":1,"data_offsets":[0,1]}}`, ten[:1])},
		{"entry not object", `"x"`, file(`{"x":[]}`, nil)},
		{"missing comma", "header", file(`{"__metadata__":{} "x":{}}`, nil)},
		{"trailing comma", "header", file(`{"__metadata__":{},}`, nil)},
		{"control character", "control character", file("{\"a\tb\":{}}", nil)},
		{"bad escape", "invalid escape", file(`{"a\qb":{}}`, nil)},
		{"bad unicode escape", "escape", file(`{"a\u12":{}}`, nil)},
		{"unterminated string", "end of JSON", file(`{"abc`, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.b)
			if !errors.Is(err, format.ErrCorruption) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode: %v, want corruption containing %q", err, tc.want)
			}
			if _, rerr := Read(bytes.NewReader(tc.b), int64(len(tc.b))); !errors.Is(rerr, format.ErrCorruption) {
				t.Fatalf("Read: %v, want corruption", rerr)
			}
		})
	}
}

// A header claiming an enormous tensor in a tiny file is refused without
// allocating anything near its size.
func TestDecodeHugeClaimAllocatesLittle(t *testing.T) {
	b := file(`{"x":{"dtype":"F64","shape":[1000000,1000000],"data_offsets":[0,8000000000000]}}`, nil)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Read(bytes.NewReader(b), 1<<40) // the reader claims a huge file too
	runtime.ReadMemStats(&after)
	if !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("Read: %v, want corruption", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("allocated %d bytes for a %d-byte header", got, len(b))
	}
}

// manyKeys is a header whose metadata has n keys.
func manyKeys(n int) string {
	var b strings.Builder
	b.WriteString(`{"__metadata__":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":""`, i)
	}
	b.WriteString("}}")
	return b.String()
}

// manyTensors is a header of n empty U8 tensors.
func manyTensors(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"t%d":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`, i)
	}
	b.WriteByte('}')
	return b.String()
}

// The limits hold right at them: MaxMetadataEntries keys and MaxTensors
// tensors decode.
func TestDecodeAtLimits(t *testing.T) {
	f, err := Decode(file(manyKeys(MaxMetadataEntries), nil))
	if err != nil || len(f.Metadata) != MaxMetadataEntries {
		t.Fatalf("%d metadata keys: %v", MaxMetadataEntries, err)
	}
	if f, err = Decode(file(manyTensors(MaxTensors), nil)); err != nil || len(f.Tensors) != MaxTensors {
		t.Fatalf("%d tensors: %v", MaxTensors, err)
	}
}

// The worst header that fits the size limit, a MaxHeaderSize object of
// short metadata keys, is refused at the key limit having cost memory in
// proportion to the limit: a few times MaxHeaderSize at most.
func TestDecodeLargestHeaderBoundedMemory(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"__metadata__":{`)
	for i := 0; b.Len() < MaxHeaderSize-16; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%x":""`, i)
	}
	b.WriteString("}}")
	hdr := b.String()
	for len(hdr) < MaxHeaderSize {
		hdr += " "
	}
	in := file(hdr[:MaxHeaderSize], nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Read(bytes.NewReader(in), int64(len(in)))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("Read: %v, want corruption", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*MaxHeaderSize {
		t.Fatalf("a %d-byte header cost %d bytes", MaxHeaderSize, got)
	}
}

// padded is prefix, then unit repeated, then suffix, then spaces, exactly
// MaxHeaderSize bytes.
func padded(prefix, unit, suffix string) string {
	var b strings.Builder
	b.Grow(MaxHeaderSize)
	b.WriteString(prefix)
	for b.Len()+len(unit)+len(suffix) <= MaxHeaderSize {
		b.WriteString(unit)
	}
	b.WriteString(suffix)
	for b.Len() < MaxHeaderSize {
		b.WriteByte(' ')
	}
	return b.String()
}

// bigTensors is a header of MaxTensors one-byte U8 tensors of the given
// rank whose names fill it to close to MaxHeaderSize.
func bigTensors(rank int) string {
	dims := strings.TrimSuffix(strings.Repeat("1,", rank), ",")
	per := MaxHeaderSize / MaxTensors
	var b strings.Builder
	b.Grow(MaxHeaderSize)
	b.WriteByte('{')
	for i := range MaxTensors {
		if i > 0 {
			b.WriteByte(',')
		}
		body := fmt.Sprintf(`":{"dtype":"U8","shape":[%s],"data_offsets":[%d,%d]}`, dims, i, i+1)
		name := fmt.Sprintf("%x", i)
		b.WriteString(`"` + name + strings.Repeat("n", max(0, per-len(body)-len(name)-3)) + body)
	}
	b.WriteByte('}')
	return b.String()
}

// Hostile headers that fit the size limit cost at most 4x MaxHeaderSize
// in all (the header's own bytes included), the bound the package and
// RELIABILITY.md state: arrays far over their limit are refused at the
// first element past it (an 8.4M-entry data_offsets array once cost 40x),
// unknown fields at their name, and what a header may really hold (one
// huge string, MaxTensors entries) is materialised once.
func TestDecodeHostileHeadersBoundedMemory(t *testing.T) {
	for _, tc := range []struct {
		name, hdr string
		buf       int
		want      string // "" for a header that decodes
	}{
		{"huge data_offsets", padded(`{"x":{"dtype":"U8","shape":[0],"data_offsets":[0`, `,0`, `]}}`), 0, "data_offsets"},
		{"huge shape", padded(`{"x":{"dtype":"U8","data_offsets":[0,0],"shape":[0`, `,0`, `]}}`), 0, "rank"},
		{"huge unknown array", padded(`{"x":{"zz":[0`, `,0`, `]}}`), 0, "unknown field"},
		{"deep unknown nesting", padded(`{"x":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"zz":`, `[`, ``), 0, "unknown field"},
		{"huge metadata array", padded(`{"__metadata__":{"k":["`, `","`, `"]}}`), 0, "not a string"},
		{"huge metadata value", padded(`{"__metadata__":{"k":"`, `v`, `"}}`), 0, ""},
		{"huge escaped name", padded(`{"\n`, `n`, `":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`), 0, ""},
		{"huge escaped value", padded(`{"__metadata__":{"k":"`, `\u00e9`, `"}}`), 0, ""},
		{"most tensors, rank 0", bigTensors(0), MaxTensors, ""},
		{"most tensors, rank 16", bigTensors(MaxRank), MaxTensors, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.hdr) > MaxHeaderSize {
				t.Fatalf("header of %d bytes", len(tc.hdr))
			}
			in := file(tc.hdr, make([]byte, tc.buf))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Read(bytes.NewReader(in), int64(len(in)))
			runtime.ReadMemStats(&after)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Read: %v", err)
			case tc.want != "" && (!errors.Is(err, format.ErrCorruption) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Read: %.200v, want corruption containing %q", err, tc.want)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 4*MaxHeaderSize {
				t.Fatalf("a %d-byte header cost %d bytes (%.1fx), want at most 4x", len(tc.hdr), got, float64(got)/MaxHeaderSize)
			}
		})
	}
}

// The header's strings decode as encoding/json decodes them: escapes,
// surrogate pairs, unpaired surrogates as U+FFFD.
func TestDecodeStringsLikeEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`"plain"`, `""`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u00e9\u4e2d"`, `"é中"`,
		`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00x"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\u0000"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatalf("encoding/json %s: %v", raw, err)
		}
		f, err := Decode(file(`{"__metadata__":{"k":`+raw+`}}`, nil))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if got := f.Metadata["k"]; got != want {
			t.Errorf("%s: got %q, want %q", raw, got, want)
		}
	}
}

func TestEncodeRefuses(t *testing.T) {
	for _, f := range []*File{
		{Tensors: []Tensor{{Name: "a", DType: U8, Shape: []uint64{2}, Data: []byte{1}}}},
		{Tensors: []Tensor{{Name: "a", DType: "F4", Shape: []uint64{1}, Data: []byte{1}}}},
		{Tensors: []Tensor{{Name: "a", DType: U8, Data: []byte{1}}, {Name: "a", DType: U8, Data: []byte{1}}}},
		{Tensors: []Tensor{{Name: metadataKey, DType: U8, Data: []byte{1}}}},
		{Tensors: []Tensor{{Name: "\xff", DType: U8, Data: []byte{1}}}},
		{Metadata: map[string]string{"k": "\xff"}},
	} {
		if _, err := Encode(f); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("Encode(%+v): %v, want invalid argument", f, err)
		}
	}
}

func equalFiles(a, b *File) bool {
	if len(a.Tensors) != len(b.Tensors) || len(a.Metadata) != len(b.Metadata) {
		return false
	}
	for k, v := range a.Metadata {
		if b.Metadata[k] != v {
			return false
		}
	}
	for i := range a.Tensors {
		x, y := a.Tensors[i], b.Tensors[i]
		if x.Name != y.Name || x.DType != y.DType || !bytes.Equal(x.Data, y.Data) || len(x.Shape) != len(y.Shape) {
			return false
		}
		for j := range x.Shape {
			if x.Shape[j] != y.Shape[j] {
				return false
			}
		}
	}
	return true
}

// FuzzDecodeHeaderJSON: a header the token-level parser accepts is valid
// JSON to encoding/json, and its metadata and tensor names are what
// encoding/json reads from it.
func FuzzDecodeHeaderJSON(f *testing.F) {
	for _, h := range []string{
		`{"__metadata__":{"a":"b\u00e9\n"},"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`,
		`{"x\"y":{"shape":[],"data_offsets":[0,1],"dtype":"U8"}, "__metadata__" : null }  `,
		`{ }`,
	} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, h string) {
		if len(h) < 2 {
			return
		}
		var buf [64]byte
		for _, n := range []int{0, 1, 2, 64} {
			d, err := Decode(file(h, buf[:n]))
			if err != nil {
				continue
			}
			var v map[string]json.RawMessage
			if err := json.Unmarshal([]byte(h), &v); err != nil {
				t.Fatalf("accepted %q, which encoding/json refuses: %v", h, err)
			}
			want := len(d.Tensors)
			if _, ok := v[metadataKey]; ok {
				want++
			}
			if len(v) != want {
				t.Fatalf("%q: %d entries to encoding/json, %d tensors", h, len(v), len(d.Tensors))
			}
			for _, x := range d.Tensors {
				if _, ok := v[x.Name]; !ok {
					t.Fatalf("%q: tensor %q not in encoding/json's reading", h, x.Name)
				}
			}
			var meta struct {
				M map[string]string `json:"__metadata__"`
			}
			if err := json.Unmarshal([]byte(h), &meta); err != nil {
				t.Fatalf("%q: metadata: %v", h, err)
			}
			for k, val := range d.Metadata {
				if meta.M[k] != val {
					t.Fatalf("%q: metadata %q = %q, encoding/json %q", h, k, val, meta.M[k])
				}
			}
		}
	})
}
