package spanmem

import (
	"testing"

	"github.com/kvstore/kvstore/format"
)

func TestContextIDSeparatesFields(t *testing.T) {
	var m1, m2 format.Fingerprint
	m2[0] = 1
	ids := map[format.ContextID]string{}
	for _, c := range []struct{ ns, name string }{{"a", "bc"}, {"ab", "c"}, {"", "abc"}, {"abc", "x"}} {
		for i, m := range []format.Fingerprint{m1, m2} {
			id := ContextID(c.ns, m, c.name)
			what := c.ns + "|" + c.name + "|" + string(rune('0'+i))
			if prev, dup := ids[id]; dup {
				t.Fatalf("%s and %s share id %x", prev, what, id[:8])
			}
			ids[id] = what
			if ContextID(c.ns, m, c.name) != id {
				t.Fatalf("%s: id is not deterministic", what)
			}
		}
	}
}

// TestContextIDPinned pins ContextID's output on fixed inputs: a span
// memory's id is written in its records and its extent trailer, so any
// change to the derivation orphans every stored memory.
func TestContextIDPinned(t *testing.T) {
	for _, c := range []struct {
		ns    string
		model format.Fingerprint
		name  string
		want  string
	}{
		{"", format.Fingerprint{}, "c", "f4ea50adba66bbb65bb30e603b938dc040eb0c51d27652110618e08db15d57dd"},
		{"ns", format.Fingerprint{1, 2, 3}, "ctx", "415403e0d381ee93eb4b6303d3ecb98ed421bde5e48eda29f88f095f88511559"},
		{"a", format.Fingerprint{1, 2, 3}, "bc", "240acc0d1acdc375dd05b4a45426bf15a6b3775e6f7ea3ff451ffabb9ec1fe3f"},
		{"ab", format.Fingerprint{1, 2, 3}, "c", "9758d593dae76667bbf2d17ed2dc4013733b376c7207d2d61ff4b202f1a53013"},
		{"tenant/ü", format.Fingerprint{0xff, 31: 0xee}, "chat 42", "4e77bd82533f9c502a6e4273a9c3902102aac1440e244aee736492673ae470d7"},
	} {
		if got := ContextID(c.ns, c.model, c.name).String(); got != c.want {
			t.Errorf("ContextID(%q, %x, %q) = %s, want %s", c.ns, c.model[:4], c.name, got, c.want)
		}
	}
}
