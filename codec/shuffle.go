package codec

import "encoding/binary"

// shuffle writes the n = len(src)/size elements of src as size byte planes
// into dst: dst[p*n+i] = src[i*size+p]. len(dst) == len(src).
func shuffle(dst, src []byte, size int) {
	n := len(src) / size
	switch size {
	case 2:
		shuffle2(dst[:n], dst[n:2*n], src[:2*n])
	case 4:
		shuffle4(dst[:4*n], src[:4*n], n)
	default:
		for i := range n {
			for p := range size {
				dst[p*n+i] = src[i*size+p]
			}
		}
	}
}

// unshuffle is the inverse of shuffle: dst[i*size+p] = src[p*n+i].
func unshuffle(dst, src []byte, size int) {
	n := len(src) / size
	switch size {
	case 2:
		unshuffle2(dst[:2*n], src[:n], src[n:2*n])
	case 4:
		unshuffle4(dst[:4*n], src[:4*n], n)
	default:
		for i := range n {
			for p := range size {
				dst[i*size+p] = src[p*n+i]
			}
		}
	}
}

// shuffle2 splits 2-byte elements into low and high planes, four at a time.
func shuffle2(lo, hi, src []byte) {
	i := 0
	for ; i+4 <= len(lo); i += 4 {
		x := binary.LittleEndian.Uint64(src[2*i:])
		binary.LittleEndian.PutUint32(lo[i:], gather8(x))
		binary.LittleEndian.PutUint32(hi[i:], gather8(x>>8))
	}
	for ; i < len(lo); i++ {
		lo[i], hi[i] = src[2*i], src[2*i+1]
	}
}

// gather8 packs bytes 0, 2, 4, 6 of x into a uint32.
func gather8(x uint64) uint32 {
	x &= 0x00ff00ff00ff00ff
	x = (x | x>>8) & 0x0000ffff0000ffff
	return uint32(x | x>>16)
}

// spread8 is the inverse of gather8: byte k of v goes to byte 2k.
func spread8(v uint32) uint64 {
	x := uint64(v)
	x = (x | x<<16) & 0x0000ffff0000ffff
	return (x | x<<8) & 0x00ff00ff00ff00ff
}

// unshuffle2 interleaves low and high planes back into 2-byte elements.
func unshuffle2(dst, lo, hi []byte) {
	i := 0
	for ; i+4 <= len(lo); i += 4 {
		l := binary.LittleEndian.Uint32(lo[i:])
		h := binary.LittleEndian.Uint32(hi[i:])
		binary.LittleEndian.PutUint64(dst[2*i:], spread8(l)|spread8(h)<<8)
	}
	for ; i < len(lo); i++ {
		dst[2*i], dst[2*i+1] = lo[i], hi[i]
	}
}

// shuffle4 splits n 4-byte elements into four planes.
func shuffle4(dst, src []byte, n int) {
	p0, p1, p2, p3 := dst[:n], dst[n:2*n], dst[2*n:3*n], dst[3*n:4*n]
	for i := range n {
		s := src[4*i : 4*i+4]
		p0[i], p1[i], p2[i], p3[i] = s[0], s[1], s[2], s[3]
	}
}

// unshuffle4 interleaves four planes back into n 4-byte elements.
func unshuffle4(dst, src []byte, n int) {
	p0, p1, p2, p3 := src[:n], src[n:2*n], src[2*n:3*n], src[3*n:4*n]
	for i := range n {
		d := dst[4*i : 4*i+4]
		d[0], d[1], d[2], d[3] = p0[i], p1[i], p2[i], p3[i]
	}
}
