package prune

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// A keep-set's bytes ("KVKS") are drawn and coded in format/keepset.go;
// MarshalBinary and UnmarshalBinary add Set's validation. UnmarshalBinary
// accepts exactly what Validate accepts, refuses anything else with
// format.ErrCorruption, and allocates no more than the input's length
// justifies.

// MarshalBinary encodes a valid set; an invalid one is ErrInvalidArgument.
func (s *Set) MarshalBinary() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	k := (*format.KeepSet)(s)
	return format.AppendKeepSet(make([]byte, 0, format.KeepSetSize(k)), k), nil
}

// UnmarshalBinary decodes b into s (see format.AppendKeepSet for the
// layout).
func (s *Set) UnmarshalBinary(b []byte) error {
	k, err := format.DecodeKeepSet(b)
	if err != nil {
		return err
	}
	out := Set(*k)
	if err := out.Validate(); err != nil {
		return fmt.Errorf("%w: prune: keep-set of %d bytes: %v", format.ErrCorruption, len(b), err)
	}
	*s = out
	return nil
}
