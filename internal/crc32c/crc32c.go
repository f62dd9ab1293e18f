package crc32c

import "hash/crc32"

// table is the Castagnoli table of hash/crc32: the portable path, and the
// path for inputs too short for a kernel to pay. On amd64 and arm64
// hash/crc32 itself uses the CRC32 instructions.
var table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C of p.
func Checksum(p []byte) uint32 { return update(0, p) }

// Update returns the CRC32C of the bytes that gave crc followed by p,
// bit for bit what crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), p)
// returns.
func Update(crc uint32, p []byte) uint32 { return update(crc, p) }
