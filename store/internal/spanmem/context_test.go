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
