// Package terminal tells the commands (tools/kvstore, lab/cmd/...) whether
// a writer is a terminal, where a redrawn progress line belongs.
package terminal

import "io"

// Is reports whether w is a terminal: on Linux an *os.File the terminal
// driver answers for (TCGETS); elsewhere an *os.File that is a character
// device (a terminal, or a device such as /dev/null where a progress line
// costs nothing).
func Is(w io.Writer) bool { return is(w) }
