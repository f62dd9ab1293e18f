package store

import "github.com/kvstore/kvstore/store/internal/spanmem"

// SpanInput is a long context's KV cache as BuildSpanMemory takes it.
type SpanInput = spanmem.Input

// SpanOptions configure BuildSpanMemory. The zero value is SeKV's defaults.
type SpanOptions = spanmem.Options

// BuildSpanMemory builds the span memory of a context from its KV cache
// (spanmem.Build), reading the model's SeKV artifacts from db: keys are
// un-rotated at their positions, the context is segmented by surprisal,
// every span is summarised per (layer, KV head) and its summary key
// projected by W, and each factored span's pre-RoPE keys and values get
// truncated SVD factors.
//
// W is the trained ArtifactRouterW when stored, else a default
// ArtifactRouterWPCA stored earlier, else it is fitted here by PCA of this
// context's pre-RoPE keys per (layer, KV head) and carried in the result
// (ProjectionRef.Fitted) for PutSpanMemory to store, so that every later
// memory of the model routes with the same W. It is deterministic: the
// same input, options and artifacts give the same memory. in's slices are
// only read. Errors wrap ErrInvalidArgument.
func (db *DB) BuildSpanMemory(in *SpanInput, opts *SpanOptions) (*SpanMemory, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	return spanmem.Build(in, opts, &dbArtifacts{db: db, in: in})
}
