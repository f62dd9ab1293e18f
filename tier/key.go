package tier

import (
	"encoding/hex"
	"fmt"
	"path"

	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
)

// Keys of one packet's objects (see the package comment):
//
//	<prefix>/<ns hash>/<model fingerprint>/<packet id>/header
//	<prefix>/<ns hash>/<model fingerprint>/<packet id>/<content>/<part>
//
// ns hash is the first 16 bytes of BLAKE3("kvstore.tier.ns\x00" + namespace)
// in hex, so a namespace name (which may hold any byte) never appears in
// a key, and the namespace prefix is fixed-length; fingerprint and id are
// their 64 hex digits, content 32 hex digits, part 6 decimal digits.

// nsHash returns namespace ns's directory name in the tier.
func nsHash(ns string) string {
	h := blake3.New()
	h.Write([]byte("kvstore.tier.ns\x00"))
	h.Write([]byte(ns))
	var sum [32]byte
	h.Sum(sum[:0])
	return hex.EncodeToString(sum[:16])
}

// nsPrefix is namespace ns's key prefix, ending in "/": every request made
// for ns names a key under it (or lists under it) and nothing else.
func (t *Tier) nsPrefix(ns string) string {
	return path.Join(t.opts.Prefix, nsHash(ns)) + "/"
}

// modelPrefix is the prefix of ns's packets for one model.
func (t *Tier) modelPrefix(ns string, fp format.Fingerprint) string {
	return t.nsPrefix(ns) + fp.String() + "/"
}

// headerKey is the key of a packet's header object.
func (t *Tier) headerKey(ns string, fp format.Fingerprint, id format.PacketID) string {
	return t.modelPrefix(ns, fp) + id.String() + "/header"
}

// partKey is the key of payload part i of the packet content c.
func (t *Tier) partKey(ns string, fp format.Fingerprint, id format.PacketID, c Content, i int) string {
	return fmt.Sprintf("%s%s/%s/%06d", t.modelPrefix(ns, fp), id, c, i)
}

// Content names one payload's bytes: the first 16 bytes of BLAKE3 over the
// payload. Two writers of one packet id with different bytes (a
// nondeterministic prefill) write their parts under different contents, so
// parts never mix; only one header wins.
type Content [16]byte

func (c Content) String() string { return hex.EncodeToString(c[:]) }

// contentOf hashes the payload given as its chunks in order.
func contentOf(chunks [][]byte) Content {
	h := blake3.New()
	for _, b := range chunks {
		h.Write(b)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	var c Content
	copy(c[:], sum[:16])
	return c
}
