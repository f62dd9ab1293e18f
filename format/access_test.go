package format

import (
	"errors"
	"math"
	"testing"
)

func TestAccessRoundTrip(t *testing.T) {
	for _, c := range []struct {
		last int64
		uses uint64
	}{{0, 0}, {1_700_000_000_000_000_000, 3}, {-1, math.MaxUint64}} {
		last, uses, err := DecodeAccess(EncodeAccess(c.last, c.uses))
		if err != nil || last != c.last || uses != c.uses {
			t.Errorf("(%d, %d) decoded as (%d, %d), %v", c.last, c.uses, last, uses, err)
		}
	}
	short, _ := Seal(KindAccess, make([]byte, 15))
	if _, _, err := DecodeAccess(short); !errors.Is(err, ErrCorruption) {
		t.Errorf("short body: %v", err)
	}
	v := EncodeAccess(1, 2)
	v[FrameSize] ^= 1
	if _, _, err := DecodeAccess(v); !errors.Is(err, ErrCorruption) {
		t.Errorf("flipped bit: %v", err)
	}
}
