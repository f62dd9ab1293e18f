//go:build !unix

package cputest

import "testing"

func TestUsedIsZero(t *testing.T) {
	if got := Used(); got != 0 {
		t.Fatalf("Used = %v on a system with no figure, want 0", got)
	}
}
