//go:build !linux

package store

// adviseWillNeed is a no-op where the store does not ask for readahead
// (see advise_linux.go).
func adviseWillNeed(b []byte) error { return nil }

// resident is false where the store does not ask (see advise_linux.go).
func resident(b []byte) bool { return false }
