package format

import (
	"encoding/binary"
	"fmt"
)

// Access statistics (kind "KVAC", under key 'x' | ns len u16 BE | ns |
// packet id): eviction's ordering hints for one packet, saved lazily. The
// body is 16 bytes, little endian:
//
//	+---------------------------+---------------------+
//	| last use, unix ns i64     | uses u64            |
//	+---------------------------+---------------------+
//	0                           8                     16
var KindAccess = RegisterKind(RecordKind{
	Name: "access statistics", Magic: MagicOf("KVAC"), Version: 1, MaxBody: 1 << 10,
})

const accessSize = 16

// EncodeAccess returns the framed "KVAC" record of a packet last used at
// last (unix ns) and used uses times.
func EncodeAccess(last int64, uses uint64) []byte {
	var b [accessSize]byte
	binary.LittleEndian.PutUint64(b[:], uint64(last))
	binary.LittleEndian.PutUint64(b[8:], uses)
	v, err := Seal(KindAccess, b[:])
	if err != nil {
		panic(err) // 16 bytes always fit
	}
	return v
}

// DecodeAccess checks and parses a framed "KVAC" record.
func DecodeAccess(v []byte) (last int64, uses uint64, err error) {
	b, err := Unseal(KindAccess, v)
	if err != nil {
		return 0, 0, err
	}
	if len(b) < accessSize {
		return 0, 0, fmt.Errorf("%w: access statistics: %d bytes, want %d", ErrCorruption, len(b), accessSize)
	}
	return int64(binary.LittleEndian.Uint64(b)), binary.LittleEndian.Uint64(b[8:]), nil
}
