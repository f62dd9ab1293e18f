package store

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
		if bytes.HasPrefix(headerKey(long, id), nsPrefix(tagHeader, short, 0)) {
			t.Errorf("header keys of %q fall under namespace %q", long, short)
		}
		if bytes.HasPrefix(indexKey(long, fp, id), indexPrefix(short, fp)) {
			t.Errorf("index keys of %q fall under namespace %q", long, short)
		}
	}
	tags := map[byte]bool{}
	for _, k := range [][]byte{headerKey("", id), indexKey("", fp, id), modelKey(fp), blobFileKey(1), keyNextBlob} {
		if tags[k[0]] {
			t.Errorf("tag %q used twice", k[0])
		}
		tags[k[0]] = true
	}
	if n, err := parseBlobFileKey(blobFileKey(123456)); err != nil || n != 123456 {
		t.Fatalf("parseBlobFileKey: %d, %v", n, err)
	}
	if _, err := parseBlobFileKey([]byte("b12")); err == nil {
		t.Fatal("parseBlobFileKey accepted a short key")
	}
	// Blob file keys sort by number.
	if bytes.Compare(blobFileKey(255), blobFileKey(256)) >= 0 {
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
		if got := prefixEnd(c.in); !bytes.Equal(got, c.want) {
			t.Errorf("prefixEnd(%x) = %x, want %x", c.in, got, c.want)
		}
	}
}
