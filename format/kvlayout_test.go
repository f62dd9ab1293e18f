package format

import "testing"

// The kernels compare the layout kind against these numbers
// (gpu/kernels/common.cuh: KVS_HND 1, KVS_PAGED_NHD 2), so they may not
// move; 0 stays "no layout" so that a zero Dest is refused, not guessed.
func TestKVLayoutValues(t *testing.T) {
	for _, tc := range []struct {
		l    KVLayout
		n    uint8
		name string
	}{{0, 0, "layout(0)"}, {KVLayoutHND, 1, "hnd"}, {KVLayoutPagedNHD, 2, "paged-nhd"}, {KVLayoutTransposedV, 3, "transposed-v"},
		{KVLayoutPagedKV, 4, "paged-kv"}, {KVLayoutPagedPacked, 5, "paged-packed"}} {
		if uint8(tc.l) != tc.n || tc.l.String() != tc.name {
			t.Errorf("layout %d = %d %q, want %d %q", tc.l, uint8(tc.l), tc.l, tc.n, tc.name)
		}
	}
}
