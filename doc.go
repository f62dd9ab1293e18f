// Package kvstore is the root of the kvstore module: an embedded storage
// engine for LLM KV-cache tensors. It holds no code; this comment is the
// map of the module's packages, which fall into four zones:
//
//	engine        what a server links: format (and format/fb, format/gguf,
//	              format/safetensors), codec, reconstruct, segment, prune,
//	              store (and store/...), gpu (and gpu/...), tier, llamacpp,
//	              adapter, and the kernels of internal/ (crc32c, rowcopy,
//	              dirsync)
//	lab           what measures and trains it: lab/llama (the reference Llama
//	              forward pass and its gradients), lab/train (adapter
//	              training), lab/quality and lab/bench (the quality and peer
//	              benchmark harnesses)
//	test support  internal/testenv, internal/s3test, internal/cputest and
//	              internal/testsummary: what tests and the lab use to find
//	              models, start servers and measure CPU time, and the test
//	              command's summary
//	commands      tools/kvstore (the operations CLI), lab/cmd/... (the lab's
//	              commands: training, quality tables, peer benchmarks),
//	              examples (and examples/...), and the test-only packages fuzz
//	              and docs
//
// The engine imports nothing of the lab, of test support or of the
// commands; the lab imports no command; test support imports only test
// support. Inside the engine every package sits on a floor and imports only
// packages on floors below it (floors_test.go holds the table; store's own
// floors are in store/floors_test.go).
package kvstore
