package gguf

import (
	"fmt"
	"math"
)

// Type is a GGUF metadata value type. The numeric values are GGUF's.
type Type uint32

const (
	TypeUint8   Type = 0
	TypeInt8    Type = 1
	TypeUint16  Type = 2
	TypeInt16   Type = 3
	TypeUint32  Type = 4
	TypeInt32   Type = 5
	TypeFloat32 Type = 6
	TypeBool    Type = 7
	TypeString  Type = 8
	TypeArray   Type = 9
	TypeUint64  Type = 10
	TypeInt64   Type = 11
	TypeFloat64 Type = 12
)

// size is the encoded size of a scalar of type t; 0 for strings and arrays,
// -1 for an unknown type.
func (t Type) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	case TypeString, TypeArray:
		return 0
	}
	return -1
}

func (t Type) String() string {
	names := [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"}
	if int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Value is one metadata value: a scalar, a string, or an array of scalars
// or strings. Scalars keep their bits in a uint64 (sign-extended for signed
// types, IEEE bits for floats).
type Value struct {
	Type Type
	Elem Type // arrays: the element type

	bits uint64   // scalars
	str  string   // strings
	arr  []uint64 // arrays of scalars
	strs []string // arrays of strings
}

// Scalar values and arrays, for writers.

func Uint32(v uint32) Value   { return Value{Type: TypeUint32, bits: uint64(v)} }
func Int32(v int32) Value     { return Value{Type: TypeInt32, bits: uint64(int64(v))} }
func Uint64(v uint64) Value   { return Value{Type: TypeUint64, bits: v} }
func Float32(v float32) Value { return Value{Type: TypeFloat32, bits: uint64(math.Float32bits(v))} }
func Float64(v float64) Value { return Value{Type: TypeFloat64, bits: math.Float64bits(v)} }
func String(s string) Value   { return Value{Type: TypeString, str: s} }
func Bool(b bool) Value {
	v := Value{Type: TypeBool}
	if b {
		v.bits = 1
	}
	return v
}

// Strings is an array of strings.
func Strings(s []string) Value { return Value{Type: TypeArray, Elem: TypeString, strs: s} }

// Uint32s is an array of u32.
func Uint32s(s []uint32) Value {
	v := Value{Type: TypeArray, Elem: TypeUint32, arr: make([]uint64, len(s))}
	for i, x := range s {
		v.arr[i] = uint64(x)
	}
	return v
}

// Int reports an integer scalar (any integer type, or bool) as int64.
func (v Value) Int() (int64, bool) {
	switch v.Type {
	case TypeUint8, TypeUint16, TypeUint32, TypeBool:
		return int64(v.bits), true
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		return int64(v.bits), true
	case TypeUint64:
		return int64(v.bits), v.bits <= math.MaxInt64
	}
	return 0, false
}

// Float reports a float or integer scalar as float64.
func (v Value) Float() (float64, bool) {
	switch v.Type {
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case TypeFloat64:
		return math.Float64frombits(v.bits), true
	}
	i, ok := v.Int()
	return float64(i), ok
}

// Str reports a string value.
func (v Value) Str() (string, bool) { return v.str, v.Type == TypeString }

// Len is the number of elements of an array (0 for a scalar).
func (v Value) Len() int { return max(len(v.arr), len(v.strs)) }

// Ints reports an array of integers as int64s.
func (v Value) Ints() ([]int64, bool) {
	if v.Type != TypeArray || v.Elem == TypeString || v.Elem == TypeFloat32 || v.Elem == TypeFloat64 {
		return nil, false
	}
	out := make([]int64, len(v.arr))
	for i, b := range v.arr {
		e, ok := Value{Type: v.Elem, bits: b}.Int()
		if !ok {
			return nil, false
		}
		out[i] = e
	}
	return out, true
}

// StringArray reports an array of strings. It is shared: do not modify it.
func (v Value) StringArray() ([]string, bool) {
	return v.strs, v.Type == TypeArray && v.Elem == TypeString
}

// equal reports whether two values are the same type and contents.
func (v Value) equal(o Value) bool {
	if v.Type != o.Type || v.Elem != o.Elem || v.bits != o.bits || v.str != o.str ||
		len(v.arr) != len(o.arr) || len(v.strs) != len(o.strs) {
		return false
	}
	for i := range v.arr {
		if v.arr[i] != o.arr[i] {
			return false
		}
	}
	for i := range v.strs {
		if v.strs[i] != o.strs[i] {
			return false
		}
	}
	return true
}

// KV is one metadata key and its value.
type KV struct {
	Key   string
	Value Value
}
