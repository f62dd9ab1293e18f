package store

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// ContextID identifies one stored span memory: BLAKE3-256 over (namespace,
// model fingerprint, context name). It is what the extent trailer names and
// what gpu.SpanKey.Context carries (store/gpusource adapts a SpanReader to
// gpu.Source; store itself does not import gpu). It is format.ContextID,
// whose methods go doc of package format shows.
type ContextID = format.ContextID

// ComputeContextID derives a span memory's id. Variable-length fields are
// length-prefixed so that no two inputs share an encoding.
func ComputeContextID(ns string, model format.Fingerprint, name string) ContextID {
	return format.ComputeContextID(ns, model, name)
}

// checkContextName refuses names that do not fit their u16 length prefix.
func checkContextName(ns, name string) error {
	if err := format.CheckNamespace(ns); err != nil {
		return err
	}
	if name == "" || len(name) > format.MaxNameLen {
		return fmt.Errorf("%w: context name of %d bytes, want 1 to %d", ErrInvalidArgument, len(name), format.MaxNameLen)
	}
	return nil
}
