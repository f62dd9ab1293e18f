package catalog

import (
	"bytes"
	"testing"

	"github.com/kvstore/kvstore/format"
)

func TestKeysUnambiguous(t *testing.T) {
	var id format.PacketID
	var fp format.Fingerprint
	// Namespaces that are prefixes of each other never share a key prefix.
	for _, pair := range [][2]string{{"a", "ab"}, {"", "a"}, {"ns", "ns\x00"}} {
		short, long := pair[0], pair[1]
		if bytes.HasPrefix(HeaderKey(long, id), NSPrefix(TagHeader, short, 0)) {
			t.Errorf("header keys of %q fall under namespace %q", long, short)
		}
		if bytes.HasPrefix(IndexKey(long, fp, id), IndexPrefix(short, fp)) {
			t.Errorf("index keys of %q fall under namespace %q", long, short)
		}
	}
	tags := map[byte]bool{}
	for _, k := range [][]byte{HeaderKey("", id), IndexKey("", fp, id), ModelKey(fp), BlobFileKey(1), KeyNextBlob} {
		if tags[k[0]] {
			t.Errorf("tag %q used twice", k[0])
		}
		tags[k[0]] = true
	}
	if n, err := ParseBlobFileKey(BlobFileKey(123456)); err != nil || n != 123456 {
		t.Fatalf("ParseBlobFileKey: %d, %v", n, err)
	}
	if _, err := ParseBlobFileKey([]byte("b12")); err == nil {
		t.Fatal("ParseBlobFileKey accepted a short key")
	}
	// Blob file keys sort by number.
	if bytes.Compare(BlobFileKey(255), BlobFileKey(256)) >= 0 {
		t.Fatal("blob file keys do not sort numerically")
	}
}

func TestPrefixEnd(t *testing.T) {
	cases := []struct{ in, want []byte }{
		{[]byte("h"), []byte("i")},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
	}
	for _, c := range cases {
		if got := PrefixEnd(c.in); !bytes.Equal(got, c.want) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", c.in, got, c.want)
		}
	}
}

// TestKeysParse: every key a parser reads back is the one its builder
// made, and truncated keys are refused.
func TestKeysParse(t *testing.T) {
	k := SpanMetaKey("tenant", "ctx")
	if ns, name, ok := ParseSpanMetaKey(k); !ok || ns != "tenant" || name != "ctx" {
		t.Fatalf("span meta key parsed as %q %q %v", ns, name, ok)
	}
	if _, _, ok := ParseSpanMetaKey(k[:len(k)-1]); ok {
		t.Fatal("truncated span meta key parsed")
	}
	if hk := SpanHeadKey("tenant", "ctx", 1, 2); hk[0] != TagSpanHead || !bytes.Equal(hk[1:len(k)], k[1:]) || len(hk) != len(k)+4 {
		t.Fatal("head keys do not extend their root key")
	}
	fp, id := format.Fingerprint{7}, format.PacketID{8}
	ik := IndexKey("ns", fp, id)
	if ns, m, i, ok := ParseIndexKey(ik); !ok || ns != "ns" || m != fp || i != id {
		t.Fatalf("index key parsed as %q %v %v %v", ns, m, i, ok)
	}
	if _, _, _, ok := ParseIndexKey(ik[:len(ik)-1]); ok {
		t.Fatal("truncated index key parsed")
	}
	if !bytes.HasPrefix(ArtifactKey(fp, "w"), NSPrefix(TagArtifact, "w", 0)) || !bytes.HasPrefix(ArtifactIndexKey(fp, "w"), ArtifactIndexKey(fp, "")) {
		t.Fatal("artifact keys do not fall under their prefixes")
	}
	if PinKey("ns", id)[0] != TagPin || AccessKey("ns", id)[0] != TagAccess || !bytes.Equal(PinKey("ns", id)[1:], AccessKey("ns", id)[1:]) {
		t.Fatal("pin and access keys differ only in their tag")
	}
}
