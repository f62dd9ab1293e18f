package format

import "hash/crc32"

// castagnoli is the CRC32C table; on amd64 and arm64 the standard library
// uses the SSE4.2 / ARMv8 CRC instructions for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC returns the CRC32C (Castagnoli) of b.
func CRC(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// CRCUpdate extends crc with b.
func CRCUpdate(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }
