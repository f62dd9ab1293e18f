package admin

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// Stats is /stats, and "kvstore stat --json".
type Stats struct {
	Packets      uint64      `json:"packets"`
	SpanMemories uint64      `json:"span_memories"`
	LiveBytes    uint64      `json:"live_bytes"` // packets' and span memories' extents
	DeadBytes    uint64      `json:"dead_bytes"`
	Groups       []StatGroup `json:"groups"`
	Files        []StatFile  `json:"blob_files"`
}

// StatGroup is the packets of one namespace and model.
type StatGroup struct {
	Namespace string `json:"namespace"`
	Model     string `json:"model"`
	Packets   int    `json:"packets"`
	Tokens    uint64 `json:"tokens"`
	Bytes     uint64 `json:"bytes"`
}

// StatFile is one blob file.
type StatFile struct {
	Num         uint32  `json:"num"`
	Path        string  `json:"path"`
	Size        uint64  `json:"size"`
	LiveBytes   uint64  `json:"live_bytes"`
	DeadBytes   uint64  `json:"dead_bytes"`
	LiveRatio   float64 `json:"live_ratio"`
	Extents     uint32  `json:"extents"`
	LiveExtents uint32  `json:"live_extents"`
	Sealed      bool    `json:"sealed"`
}

// StatsOf reads db's totals, groups and blob files.
func StatsOf(db *store.DB) (*Stats, error) {
	s := db.Stats()
	out := &Stats{Packets: s.Packets, SpanMemories: s.SpanMemories, LiveBytes: s.LiveBytes, DeadBytes: s.DeadBytes,
		Groups: []StatGroup{}, Files: []StatFile{}}
	groups := map[[2]string]*StatGroup{}
	err := db.Headers(func(h *format.PacketHeader) error {
		k := [2]string{h.Namespace, h.Model.String()}
		g := groups[k]
		if g == nil {
			g = &StatGroup{Namespace: k[0], Model: k[1]}
			groups[k] = g
		}
		g.Packets++
		g.Tokens += uint64(h.Tokens)
		g.Bytes += h.ExtentLength
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		out.Groups = append(out.Groups, *g)
	}
	sort.Slice(out.Groups, func(i, j int) bool {
		a, b := out.Groups[i], out.Groups[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Model < b.Model)
	})
	for _, f := range s.BlobFiles {
		ratio := 0.0
		if used := f.LiveBytes + f.DeadBytes; used > 0 {
			ratio = float64(f.LiveBytes) / float64(used)
		}
		out.Files = append(out.Files, StatFile{Num: f.Num, Path: f.Path, Size: f.Size, LiveBytes: f.LiveBytes,
			DeadBytes: f.DeadBytes, LiveRatio: ratio, Extents: f.Extents, LiveExtents: f.LiveExtents, Sealed: f.Sealed})
	}
	return out, nil
}

// Row is one packet in a List.
type Row struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	Model     string `json:"model"`
	Tokens    uint32 `json:"tokens"`
	Bytes     uint64 `json:"bytes"`
	DType     string `json:"dtype"`
	Layers    uint32 `json:"layers"`
	AdapterID string `json:"adapter_id"`
}

// List is /ls, and "kvstore ls --json".
type List struct {
	Packets []Row  `json:"packets"`
	More    bool   `json:"more"`           // the limit cut the list short
	Next    string `json:"next,omitempty"` // with More: the cursor of the next page
}

// ListOptions filter and page a List or ContextList.
type ListOptions struct {
	Namespace string // only this namespace ("": all)
	Model     string // only models whose fingerprint starts with this hex prefix
	Limit     int    // at most so many rows (0: all)
	After     string // rows after this cursor (a List's or ContextList's Next)
}

// Check refuses a Model that is not hex and a malformed After cursor
// (store.ErrInvalidArgument), as ListOf and ContextsOf do.
func (o *ListOptions) Check() error {
	_, _, err := o.check()
	return err
}

func (o *ListOptions) check() (after cursor, hasAfter bool, err error) {
	if err := checkModel(o.Model); err != nil {
		return after, false, err
	}
	return parseCursor(o.After)
}

// errStop ends a Headers walk early.
var errStop = fmt.Errorf("stop")

// ListOf lists db's packets in catalog order (namespace, then id). A
// model filter that is not hex or a malformed cursor is
// store.ErrInvalidArgument.
func ListOf(db *store.DB, o ListOptions) (*List, error) {
	after, hasAfter, err := o.check()
	if err != nil {
		return nil, err
	}
	out := &List{Packets: []Row{}}
	model := strings.ToLower(o.Model)
	var last cursor
	err = db.Headers(func(h *format.PacketHeader) error {
		cur := cursor{h.Namespace, h.ID.String()}
		if (o.Namespace != "" && h.Namespace != o.Namespace) || !strings.HasPrefix(h.Model.String(), model) ||
			(hasAfter && !cur.after(after)) {
			return nil
		}
		if o.Limit > 0 && len(out.Packets) == o.Limit {
			out.More, out.Next = true, last.String()
			return errStop
		}
		last = cur
		out.Packets = append(out.Packets, Row{ID: h.ID.String(), Namespace: h.Namespace, Model: h.Model.String(),
			Tokens: h.Tokens, Bytes: h.ExtentLength, DType: h.DType.String(), Layers: h.Layers, AdapterID: h.AdapterID})
		return nil
	})
	if err != nil && err != errStop {
		return nil, err
	}
	return out, nil
}

// ContextRow is one span memory context in a ContextList.
type ContextRow struct {
	ID        string    `json:"id"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Model     string    `json:"model"`
	Tokens    int       `json:"tokens"`
	Spans     int       `json:"spans"`
	Factored  int       `json:"factored_spans"`
	Anchors   int       `json:"anchors"`
	Bytes     uint64    `json:"bytes"`
	Created   time.Time `json:"created"`
}

// ContextList is /contexts, and "kvstore ls --contexts --json".
type ContextList struct {
	Contexts []ContextRow `json:"contexts"`
	More     bool         `json:"more"`           // the limit cut the list short
	Next     string       `json:"next,omitempty"` // with More: the cursor of the next page
}

// ContextsOf lists db's span memory contexts in catalog order (namespace,
// then name), filtered and paged as ListOf does.
func ContextsOf(db *store.DB, o ListOptions) (*ContextList, error) {
	after, hasAfter, err := o.check()
	if err != nil {
		return nil, err
	}
	out := &ContextList{Contexts: []ContextRow{}}
	model := strings.ToLower(o.Model)
	var last cursor
	err = db.SpanMemories(func(i store.SpanMemoryInfo) error {
		cur := cursor{i.Namespace, i.Name}
		if (o.Namespace != "" && i.Namespace != o.Namespace) || !strings.HasPrefix(i.Model.String(), model) ||
			(hasAfter && !cur.after(after)) {
			return nil
		}
		if o.Limit > 0 && len(out.Contexts) == o.Limit {
			out.More, out.Next = true, last.String()
			return errStop
		}
		last = cur
		out.Contexts = append(out.Contexts, ContextRow{ID: i.Context.String(), Namespace: i.Namespace, Name: i.Name,
			Model: i.Model.String(), Tokens: i.Tokens, Spans: i.Spans, Factored: i.Factored, Anchors: i.Anchors,
			Bytes: i.ExtentLength, Created: i.Created})
		return nil
	})
	if err != nil && err != errStop {
		return nil, err
	}
	return out, nil
}

// Packet is /inspect/{id}, and "kvstore inspect --json" of a packet.
type Packet struct {
	Kind          string    `json:"kind"` // "packet"
	ID            string    `json:"id"`
	Namespace     string    `json:"namespace"`
	Model         string    `json:"model"`
	AdapterID     string    `json:"adapter_id"`
	Version       uint16    `json:"format_version"`
	Tokens        uint32    `json:"tokens"`
	KeptTokens    uint32    `json:"kept_tokens,omitempty"` // > 0: pruned, rows kept per (layer, head)
	HeaderTokens  uint32    `json:"header_tokens"`
	TrailerTokens uint32    `json:"trailer_tokens"`
	TokenIDs      []uint32  `json:"token_ids"`
	BasePosition  int64     `json:"base_position"`
	Layers        uint32    `json:"layers"`
	KVHeads       uint32    `json:"kv_heads"`
	HeadDim       uint32    `json:"head_dim"`
	DType         string    `json:"dtype"`
	File          string    `json:"file"`
	ExtentOffset  uint64    `json:"extent_offset"`
	ExtentLength  uint64    `json:"extent_length"`
	Created       time.Time `json:"created"`
	Chunks        []Chunk   `json:"chunks"`
	Spec          *Spec     `json:"model_spec"`
	SpecError     string    `json:"model_spec_error,omitempty"`
}

// Chunk is one chunk of a Packet.
type Chunk struct {
	Layer     uint32   `json:"layer"`
	Kind      string   `json:"kind"`
	Shape     []uint32 `json:"shape"`
	DType     string   `json:"dtype"`
	Codec     string   `json:"codec"`
	Offset    uint64   `json:"offset"`
	Length    uint64   `json:"length"`
	RawLength uint64   `json:"raw_length"`
	CRC32C    string   `json:"crc32c"`
}

// Spec is a model spec.
type Spec struct {
	Architecture string      `json:"architecture"`
	Layers       int         `json:"layers"`
	KVHeads      int         `json:"kv_heads"`
	HeadDim      int         `json:"head_dim"`
	DType        string      `json:"dtype"`
	WeightsID    string      `json:"weights_id"`
	RoPE         format.RoPE `json:"rope"`
}

// PacketOf describes packet h of db: its records, where its extent is
// (dir is the store's directory, for a blob file the catalog no longer
// lists) and its model spec, or why that could not be read.
func PacketOf(db *store.DB, dir string, h *format.PacketHeader) *Packet {
	out := &Packet{Kind: "packet", ID: h.ID.String(), Namespace: h.Namespace, Model: h.Model.String(), AdapterID: h.AdapterID,
		Version: h.Version, Tokens: h.Tokens, KeptTokens: h.KeptTokens, HeaderTokens: h.HeaderTokens, TrailerTokens: h.TrailerTokens,
		TokenIDs: h.TokenIDs, BasePosition: h.BasePosition, Layers: h.Layers, KVHeads: h.KVHeads, HeadDim: h.HeadDim,
		DType: h.DType.String(), ExtentOffset: h.ExtentOffset, ExtentLength: h.ExtentLength,
		Created: time.Unix(0, h.CreatedUnixNs).UTC()}
	if out.TokenIDs == nil {
		out.TokenIDs = []uint32{}
	}
	for _, c := range h.Chunks {
		out.Chunks = append(out.Chunks, Chunk{Layer: c.Layer, Kind: c.Kind.String(), Shape: c.Shape,
			DType: c.DType.String(), Codec: c.Codec.String(), Offset: c.Offset, Length: c.Length,
			RawLength: c.RawLength, CRC32C: fmt.Sprintf("%08x", c.CRC32C)})
	}
	out.File = BlobPath(db, dir, h.BlobFile)
	out.Spec, out.SpecError = SpecOf(db, h.Model)
	return out
}

// BlobPath is the path of blob file num of db, whose directory is dir.
func BlobPath(db *store.DB, dir string, num uint32) string {
	for _, f := range db.BlobFiles() {
		if f.Num == num {
			return f.Path
		}
	}
	return filepath.Join(dir, "blobs", fmt.Sprintf("%06d.blob", num))
}

// SpecOf is the model spec of fp, or why it could not be read.
func SpecOf(db *store.DB, fp format.Fingerprint) (*Spec, string) {
	m, err := db.Model(fp)
	if err != nil {
		return nil, err.Error()
	}
	return &Spec{Architecture: m.Architecture, Layers: m.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim,
		DType: m.DType.String(), WeightsID: m.WeightsID, RoPE: m.RoPE}, ""
}

// Finding is a store.Finding in JSON.
type Finding struct {
	Kind      string `json:"kind"`
	File      string `json:"file,omitempty"`
	Offset    uint64 `json:"offset"`
	Length    uint64 `json:"length"`
	Namespace string `json:"namespace,omitempty"`
	ID        string `json:"id,omitempty"`
	Context   string `json:"context,omitempty"`
	Layer     int    `json:"layer"`
	Chunk     string `json:"chunk,omitempty"`
	Detail    string `json:"detail,omitempty"`
	Text      string `json:"text"`
}

// FindingsOf converts findings (never nil: [] in JSON).
func FindingsOf(fs []store.Finding) []Finding {
	out := []Finding{}
	for _, f := range fs {
		o := Finding{Kind: string(f.Kind), File: f.File, Offset: f.Offset, Length: f.Length, Namespace: f.Namespace,
			Context: f.Context, Layer: f.Layer, Detail: f.Detail, Text: f.String()}
		if f.ID != [32]byte{} {
			o.ID = fmt.Sprintf("%x", f.ID)
		}
		if f.Chunk != 0 {
			o.Chunk = f.Chunk.String()
		}
		out = append(out, o)
	}
	return out
}

// Verify is /verify, and "kvstore verify --json".
type Verify struct {
	Extents   int64     `json:"extents"`
	Chunks    int64     `json:"chunks"`
	Bytes     int64     `json:"bytes"`
	Skipped   int64     `json:"skipped"`
	Truncated bool      `json:"truncated"`
	Findings  []Finding `json:"findings"`
}

// VerifyOf converts a store.VerifyReport.
func VerifyOf(rep *store.VerifyReport) *Verify {
	return &Verify{Extents: rep.Extents, Chunks: rep.Chunks, Bytes: rep.Bytes, Skipped: rep.Skipped,
		Truncated: rep.Truncated, Findings: FindingsOf(rep.Findings)}
}

// Check is /check, and "kvstore check --json".
type Check struct {
	Files        int       `json:"files"`
	Packets      int       `json:"packets"`
	SpanMemories int       `json:"span_memories"`
	Findings     []Finding `json:"findings"`
	Garbage      []Garbage `json:"garbage"`
	GarbageBytes uint64    `json:"garbage_bytes"`
}

// Garbage is unreferenced space (store.Garbage).
type Garbage struct {
	Kind    string `json:"kind"`
	File    string `json:"file"`
	Offset  uint64 `json:"offset"`
	Length  uint64 `json:"length"`
	Extents int    `json:"extents"`
	Reused  bool   `json:"reused"`
}

// CheckOf converts a store.CheckReport.
func CheckOf(rep *store.CheckReport) *Check {
	out := &Check{Files: rep.Files, Packets: rep.Packets, SpanMemories: rep.SpanMemories,
		Findings: FindingsOf(rep.Findings), Garbage: []Garbage{}, GarbageBytes: rep.GarbageBytes}
	for _, g := range rep.Garbage {
		out.Garbage = append(out.Garbage, Garbage{Kind: string(g.Kind), File: g.File, Offset: g.Offset, Length: g.Length,
			Extents: g.Extents, Reused: g.Reused})
	}
	return out
}
