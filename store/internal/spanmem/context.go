package spanmem

import "github.com/kvstore/kvstore/format"

// ContextID derives a span memory's id (format.ComputeContextID).
func ContextID(ns string, model format.Fingerprint, name string) format.ContextID {
	return format.ComputeContextID(ns, model, name)
}
