package bloblog

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AdviseWillNeed asks the kernel to start reading the pages under b, a
// slice of a mapping made by mmapFile, widened to whole pages (a mapping
// starts on a page and spans whole pages, so the widened range stays in
// it), and returns without waiting. It is advice: the error, if any, says
// the request was refused, and changes nothing but speed.
func AdviseWillNeed(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	page := os.Getpagesize()
	head := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % uintptr(page))
	n := (head + len(b) + page - 1) / page * page
	all := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), -head)), n)
	for len(all) > 0 {
		piece := all[:min(len(all), willNeedPiece)]
		if err := unix.Madvise(piece, unix.MADV_WILLNEED); err != nil {
			return err
		}
		all = all[len(piece):]
	}
	return nil
}

// Resident reports whether the page holding b[0] is in the page cache (a
// mincore of one page, about a microsecond); false if b is empty or the
// kernel will not say.
func Resident(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b))) &^ (page - 1)
	var vec [1]byte
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, start, page, uintptr(unsafe.Pointer(&vec[0])))
	return errno == 0 && vec[0]&1 != 0
}

// willNeedPiece is the most one madvise asks for: Linux reads at most the
// device's readahead size (read_ahead_kb, or its largest request if that is
// larger) per MADV_WILLNEED and drops the rest. Where both are under 4 MiB
// the rest of a piece is faulted in with that small a read-around.
const willNeedPiece = 4 << 20
