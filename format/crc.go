package format

import "github.com/kvstore/kvstore/internal/crc32c"

// CRC returns the CRC32C (Castagnoli) of b, bit for bit what hash/crc32
// computes with the Castagnoli table; internal/crc32c folds long inputs
// with carry-less multiplication where the CPU has it.
func CRC(b []byte) uint32 { return crc32c.Checksum(b) }

// CRCUpdate extends crc with b.
func CRCUpdate(crc uint32, b []byte) uint32 { return crc32c.Update(crc, b) }
