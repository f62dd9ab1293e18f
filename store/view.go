package store

import (
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store/internal/view"
)

// View is a packet read from the store: its header and, chunk by chunk, its
// tensors. On an OS file system the bytes alias a read-only mapping of the
// blob file (zero copies); elsewhere each chunk is copied into the View on
// first use. Chunks are verified against their CRC32C on first read (unless
// Options.DisableChecksums), so no unverified byte is returned.
//
// A View pins its blob file: the bytes stay valid and unchanged, even if the
// packet is deleted or the DB closed, until Release. Slices returned by
// Layer and Chunk must not be written to and must not be used after
// Release. A View is safe for concurrent use.
//
// If the blob file is truncated under the mapping, or the disk fails to
// read a mapped page, the store's own reads of the view (verification,
// CopyChunk, Assemble) return an error wrapping ErrCorruption or
// syscall.EIO instead of letting SIGBUS end the process
// (store/internal/bloblog/fault.go). Slices Chunk and Layer return alias
// the mapping: the caller's own reads of them are not guarded, so a caller
// that must survive such a file uses CopyChunk or Options.DisableMmap.
type View struct {
	in *view.View
}

// fromView wraps store/internal/view's view; nil stays nil.
func fromView(v *view.View) *View {
	if v == nil {
		return nil
	}
	return &View{in: v}
}

// Header returns the packet's header, decoded for this view. Do not modify
// it: the view reads its chunk descriptors. It stays readable after
// Release.
func (v *View) Header() *format.PacketHeader { return v.in.Header() }

// Layers is the number of layers; Layer accepts 0..Layers()-1.
func (v *View) Layers() int { return v.in.Layers() }

// Pruned reports whether the packet was stored pruned: Layer then returns
// [kv_heads][k][head_dim] tensors and Keep says which rows they are.
func (v *View) Pruned() bool { return v.in.Pruned() }

// Layer returns layer l's keys and values, each [kv_heads][tokens][head_dim]
// in the header's dtype; [kv_heads][k][head_dim] for a pruned packet, its
// kept rows (see Keep). A compressed chunk is verified, then decoded once
// into a buffer the view owns (not zero-copy). A chunk that fails its CRC
// is ErrCorruption (a *ChunkError).
func (v *View) Layer(l int) (k, val []byte, err error) {
	k, val, err = v.in.Layer(l)
	return k, val, chunkError(err)
}

// Chunk returns chunk i's stored bytes: layer i/2, K if i is even, V if
// odd; encoded under the chunk's codec (Header().Chunks[i].Codec) when not
// raw. A pruned packet's chunk 2*Layers() is its positions (see Keep). A
// chunk that fails its CRC is ErrCorruption (a *ChunkError naming file,
// offset, packet, layer and K|V), every time it is asked for.
func (v *View) Chunk(i int) ([]byte, error) {
	b, err := v.in.Chunk(i)
	return b, chunkError(err)
}

// CopyChunk copies chunk i's stored bytes, those Chunk returns, into dst,
// which must hold at least the chunk's Length bytes, and returns how many
// it copied: the read a server makes to fill its own buffers. A chunk not
// yet verified has its CRC32C computed in the same pass as the copy
// instead of a pass of its own, and checked before CopyChunk returns; a
// mismatch is Chunk's *ChunkError (ErrCorruption), every time, and leaves
// dst's first Length bytes unspecified. On a blob file that is not mapped
// the chunk is read straight into dst.
func (v *View) CopyChunk(dst []byte, i int) (int, error) {
	n, err := v.in.CopyChunk(dst, i)
	return n, chunkError(err)
}

// Keep returns the kept local positions of a pruned packet, k per (layer,
// KV head) in row order (see package prune): row j of head h of Layer(l)
// is the packet's row Keep().Kept(l, h)[j]. It is nil for a whole packet.
// The positions chunk is verified against its CRC32C (a *ChunkError when
// it fails) and each bitmap checked (k bits set, none at or beyond
// Tokens) before it is returned: a bad one is ErrCorruption. The set is
// decoded once per view and shared: do not modify it.
func (v *View) Keep() (*prune.Set, error) {
	s, err := v.in.Keep()
	return s, chunkError(err)
}

// Release ends the view: its blob file may then be unmapped and, if
// obsolete, removed. It is idempotent; afterwards Layer and Chunk return
// ErrClosed.
func (v *View) Release() { v.in.Release() }

// viewOptions are the views' settings: the DB's checksum option, counters
// and ErrClosed.
func (db *DB) viewOptions() view.Options {
	st := &db.st
	return view.Options{
		Verify: !db.opts.DisableChecksums, Closed: ErrClosed,
		Counters: view.Counters{BytesRead: &st.bytesRead, VerifiedBytes: &st.verifiedBytes, Corruptions: &st.corruptions, Views: &st.views},
	}
}
