package store

import "github.com/kvstore/kvstore/store/internal/spanmem"

// Routing is the zoom-in policy of one span memory, what stays on the GPU
// beside the resident rows: per (layer, KV head) group (layer-major) a
// reconstruct.Router over the projected summary keys, and the threshold
// tau (store/internal/spanmem builds it and documents its fields).
type Routing = spanmem.Routing
