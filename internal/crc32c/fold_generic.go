//go:build !amd64 || purego

package crc32c

import "hash/crc32"

// kernel names the folding kernel Update uses: none on this build.
var kernel = "none"

func update(crc uint32, p []byte) uint32 { return crc32.Update(crc, table, p) }

// copyUpdate is Copy for len(dst) == len(src): the CRC of src, then the
// copy (in that order, so that an overlap cannot change what is summed).
func copyUpdate(dst, src []byte, crc uint32) uint32 {
	crc = crc32.Update(crc, table, src)
	copy(dst, src)
	return crc
}
