// Command kvtrain trains what kvstore serves, apart from the operations
// CLI (tools/kvstore), which never runs a model's gradient. Its verbs train
// a KV Packet adapter (package adapter) on a llama2.c checkpoint with
// lab/train, and SeKV's span-memory routers with lab/router, and store
// them in a store:
//
//	kvtrain adapter --dir STORE [--create] --model CKPT [--json] [flags]
//	go run ./lab/cmd/kvtrain adapter --dir STORE --create --model ../shared/testdata/stories260K.bin
//	kvtrain router --dir STORE [--create] --model CKPT [--checkpoint FILE] [flags]
//	go run ./lab/cmd/kvtrain router --dir STORE --create --model ../shared/testdata/gocode-2k.bin
//
// router (router.go's long help says the rest) builds its examples from
// windows of the non-test .go files of GOROOT/src, with needles, trains W,
// bias and tau per (layer, KV head) with Adam (the zoom BCE and budget
// penalty, and with --kl SeKV's distillation KL through straight-through
// zoom decisions over each window's span memory at --kl-budgets), with
// --recency also a recency weight, and stores them as the store's router
// artifacts (sekv/router-w, sekv/router-bias, sekv/tau,
// sekv/router-recency) for the model fingerprint (--model, --dtype,
// --weights-id), where span memory's routing picks them up. Its
// state is checkpointed (--checkpoint) as it goes; a run with an existing
// checkpoint resumes from it; SIGINT or SIGTERM saves it and exits 130
// with nothing stored. lab/cmd/longctxquality -routers STORE measures the
// stored routers (span+trained).
//
// adapter draws --requests training requests (--docs-min to --docs-max
// documents of --doc-len tokens and a --question-len question, from the
// model's own sampled text or, with --data DIR, byte cuts of the .go files
// under DIR for byte-level models), has the model read each request whole
// as the teacher and greedy-generate --answer tokens, and trains the
// adapter's --header and --trailer rows by self-distillation (KL loss,
// AdamW with --lr decayed linearly over --epochs; --init stats, token, or
// text with --init-text FILE: a hidden header of the file's bytes, one row
// per byte; --epochs 0 stores the initial adapter untrained).
// --data never reads _test.go files (lab/quality evaluates on them) unless
// --tests is given, nor testdata or vendor directories. --shape needle
// draws lab/quality's multi-document needles instead (--doc-min to
// --doc-len bytes of whole lines per document, one defining a constant,
// the question its recall line) and the loss covers every token of the
// question and the teacher-forced value, as packetneedle scores them;
// --loss-on value keeps only the positions that predict the value (and
// its closing quote), --loss-on both adds them to every request's
// examples a second time, so they weigh double.
// --epoch-dir DIR writes the adapter after every epoch
// (DIR/epoch-N.safetensors); --init-file FILE starts from one (its rows,
// not its AdamW state), so an interrupted run can go on; --baseline prints
// the examples' loss with no adapter and the initial one first.
// The adapter is stored with adapter.Put for the model fingerprint of the
// packets it serves (--model, --dtype, --weights-id, as kvstore's adapter
// verbs compute it), under --id or its content id (kvp-<hash>); it prints
// what it stored, as JSON with --json. A progress line goes to stderr: on
// a terminal it is redrawn in place, elsewhere (a pipe, a log file) a line
// is written at most every ten seconds. kvstore adapter ls, export and
// import list and move stored adapters.
//
// rankgate trains SeKV's rank gate g_phi (lab/rankgate) on --contexts
// prefilled byte cuts of the non-_test .go files under --data and stores
// it as the model's store.ArtifactRankGate; --heldout N first measures it
// against the energy threshold on cuts of the _test.go files. With
// --checkpoint FILE an interrupted run saves its samples and Adam state
// and a rerun with the same flags resumes from them:
//
//	kvtrain rankgate --dir STORE --model CKPT --data "$(go env GOROOT)/src" --checkpoint rg.ckpt [--heldout 16]
//
// The store is opened before training, so that a mistyped --dir fails at
// once (--create makes a new store there), and held, locked, until the
// adapter is stored.
//
// The first SIGINT (Ctrl-C) or SIGTERM stops training before its next
// step: nothing is stored, the store is left as it was, and kvtrain exits
// with 130 after one "interrupted:" line; a second signal kills it at
// once.
//
// Exit codes:
//
//	0    success
//	1    training or storing failed
//	2    bad usage: unknown command, bad flag or argument
//	130  interrupted by SIGINT or SIGTERM: nothing was stored (router:
//	     its checkpoint saved)
//
// The parser is cobra (with pflag), as kvstore's.
package main
