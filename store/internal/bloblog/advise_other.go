//go:build !linux

package bloblog

// AdviseWillNeed is a no-op where the store does not ask for readahead
// (see advise_linux.go).
func AdviseWillNeed(b []byte) error { return nil }

// resident is false where the store does not ask (see advise_linux.go).
func Resident(b []byte) bool { return false }
