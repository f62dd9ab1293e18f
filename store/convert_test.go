package store

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/maint"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// TestConversionsKeepEveryField: each public type converted field by
// field from its internal twin has the twin's fields, by name, and its
// conversions carry every one (each filled with a non-zero value, nested
// reports and slices too, must arrive non-zero). The types converted with
// a plain type conversion need no test: the compiler refuses them when the
// fields differ.
func TestConversionsKeepEveryField(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      any
		convert func(any) any
	}{
		{"Finding", maint.Finding{}, func(x any) any { return fromFinding(x.(maint.Finding)) }},
		{"Finding back", Finding{}, func(x any) any { return toFinding(x.(Finding)) }},
		{"Garbage", maint.Garbage{}, func(x any) any { return fromGarbage(x.(maint.Garbage)) }},
		{"CheckReport", maint.CheckReport{}, func(x any) any { r := x.(maint.CheckReport); return *fromCheckReport(&r) }},
		{"CompactReport", maint.CompactReport{}, func(x any) any { r := x.(maint.CompactReport); return *fromCompactReport(&r) }},
		{"GCReport", maint.GCReport{}, func(x any) any { r := x.(maint.GCReport); return *fromGCReport(&r) }},
		{"VerifyReport", maint.VerifyReport{}, func(x any) any { r := x.(maint.VerifyReport); return *fromVerifyReport(&r) }},
		{"SpanMemory", spanmem.Memory{}, func(x any) any { m := x.(spanmem.Memory); return *fromSpanMemory(&m) }},
		{"SpanMemory back", SpanMemory{}, func(x any) any { m := x.(SpanMemory); return *toSpanMemory(&m) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := reflect.New(reflect.TypeOf(c.in)).Elem()
			fillNonZero(in)
			out := reflect.ValueOf(c.convert(in.Interface()))
			if got, want := fieldNames(out.Type()), fieldNames(in.Type()); !reflect.DeepEqual(got, want) {
				t.Fatalf("%v has fields %v, its twin %v has %v", out.Type(), got, in.Type(), want)
			}
			if path := zeroField(out, out.Type().String()); path != "" {
				t.Fatalf("%s is zero after the conversion", path)
			}
		})
	}
}

// fieldNames lists a struct type's field names in order.
func fieldNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		out = append(out, f.Name)
	}
	return out
}

// fillNonZero sets every settable field of v to a non-zero value: numbers 1,
// strings "x", true, one-element slices and maps, pointers to filled
// values, functions that return zero values.
func fillNonZero(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillNonZero(v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillNonZero(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillNonZero(v.Index(0))
	case reflect.Array:
		for i := range v.Len() {
			fillNonZero(v.Index(i))
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillNonZero(k)
		fillNonZero(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, v.Type().NumOut())
			for i := range out {
				out[i] = reflect.Zero(v.Type().Out(i))
			}
			return out
		}))
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	}
}

// zeroField returns the path of the first exported field of v (nested
// structs, pointers and slice elements included) that is zero, or "".
func zeroField(v reflect.Value, path string) string {
	if v.IsZero() {
		return path
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				if p := zeroField(v.Field(i), path+"."+f.Name); p != "" {
					return p
				}
			}
		}
	case reflect.Pointer:
		return zeroField(v.Elem(), path)
	case reflect.Slice:
		for i := range v.Len() {
			if p := zeroField(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// TestChunkError: an internal chunk error, bare or wrapped, comes out as
// the store's *ChunkError for errors.As, with the same text, still
// ErrCorruption; other errors pass unchanged.
func TestChunkError(t *testing.T) {
	in := &bloblog.ChunkError{File: "000001.blob", Offset: 4096, Length: 64, Layer: 2, Kind: format.ChunkV, Want: 1, Computed: 2}
	other := errors.New("other")
	for _, c := range []struct {
		name  string
		err   error
		chunk bool
	}{
		{"bare", in, true},
		{"wrapped", fmt.Errorf("assemble: item 3: %w", in), true},
		{"joined", errors.Join(other, fmt.Errorf("layer: %w", in)), true},
		{"other", other, false},
		{"nil", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := chunkError(c.err)
			if !c.chunk {
				if got != c.err {
					t.Fatalf("chunkError(%v) = %v, want it unchanged", c.err, got)
				}
				return
			}
			var ce *ChunkError
			switch {
			case !errors.As(got, &ce):
				t.Fatalf("%v: no *store.ChunkError in the chain", got)
			case *ce != ChunkError(*in):
				t.Fatalf("ChunkError %+v, want %+v", *ce, *in)
			case got.Error() != c.err.Error():
				t.Fatalf("text %q, want %q", got, c.err)
			case !errors.Is(got, ErrCorruption):
				t.Fatalf("%v is not ErrCorruption", got)
			}
		})
	}
}

// TestKindsMatch: the store's finding and garbage kinds are maint's, name
// for name, since reports convert one to the other by value.
func TestKindsMatch(t *testing.T) {
	for _, c := range []struct{ store, maint string }{
		{string(FindingChunkCRC), string(maint.FindingChunkCRC)},
		{string(FindingTrailer), string(maint.FindingTrailer)},
		{string(FindingRecord), string(maint.FindingRecord)},
		{string(FindingDangling), string(maint.FindingDangling)},
		{string(FindingOverlap), string(maint.FindingOverlap)},
		{string(FindingAccounting), string(maint.FindingAccounting)},
		{string(FindingIndex), string(maint.FindingIndex)},
		{string(FindingModel), string(maint.FindingModel)},
		{string(FindingBlobHeader), string(maint.FindingBlobHeader)},
		{string(GarbageTail), string(maint.GarbageTail)},
		{string(GarbageFile), string(maint.GarbageFile)},
		{string(GarbageRecord), string(maint.GarbageRecord)},
	} {
		if c.store != c.maint {
			t.Errorf("store kind %q, maint's %q", c.store, c.maint)
		}
	}
}
