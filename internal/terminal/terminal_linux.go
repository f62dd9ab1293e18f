package terminal

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

func is(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
