//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Sentinel errors; every error this package returns wraps one of them (or
// one of package store's, from Save and Load).
var (
	// ErrNoLibrary: no libllama in the directory given (or in
	// $KVSTORE_LLAMA_LIB), or it would not load.
	ErrNoLibrary = errors.New("llamacpp: libllama not found or not loadable")
	// ErrABI: the library is another llama.cpp version than the one this
	// binding's struct layouts were read from (ABIVersion).
	ErrABI = errors.New("llamacpp: libllama of another ABI")
	// ErrLlama: a llama.cpp call failed (a model that does not load, a
	// decode that returns an error, a state that does not import).
	ErrLlama = errors.New("llamacpp: llama.cpp call failed")
	// ErrState: a sequence state this package cannot read or build.
	ErrState = errors.New("llamacpp: bad sequence state")
	// ErrInvalidArgument: a call's arguments are unusable.
	ErrInvalidArgument = errors.New("llamacpp: invalid argument")
)

// LibEnv is the environment variable naming the directory that holds
// libllama*.so when Options.LibDir is empty.
const LibEnv = "KVSTORE_LLAMA_LIB"

// Options say where the library is and what to do with its log.
type Options struct {
	// LibDir is the directory holding libllama*.so, libggml*.so and the
	// ggml CPU backends (bins/linux-x64 of @node-llama-cpp/linux-x64).
	// Empty: $KVSTORE_LLAMA_LIB.
	LibDir string
	// Log, when not nil, receives llama.cpp's log lines (level is ggml's:
	// 1 debug, 2 info, 3 warn, 4 error). By default nothing is logged; the
	// last error lines are kept to explain failures.
	Log func(level int, msg string)
}

// Library is libllama loaded into the process. A process loads it once:
// Open returns the same Library for the same directory, and refuses
// another.
type Library struct {
	dir     string
	version string

	backendLoadAll     func(dir string)
	logSet             func(cb, user uintptr)
	modelDefaultParams func() modelParams
	ctxDefaultParams   func() contextParams
	modelLoad          func(path string, p modelParams) uintptr
	modelFree          func(m uintptr)
	initFromModel      func(m uintptr, p contextParams) uintptr
	free               func(ctx uintptr)
	modelNLayer        func(m uintptr) int32
	modelNHeadKV       func(m uintptr) int32
	modelNHead         func(m uintptr) int32
	modelNEmbd         func(m uintptr) int32
	modelGetVocab      func(m uintptr) uintptr
	vocabNTokens       func(v uintptr) int32
	nCtx               func(ctx uintptr) uint32
	getMemory          func(ctx uintptr) uintptr
	decode             func(ctx uintptr, b batch) int32
	getLogitsIth       func(ctx uintptr, i int32) *float32
	memoryClear        func(mem uintptr, data bool)
	memorySeqRm        func(mem uintptr, seq, p0, p1 int32) bool
	memorySeqAdd       func(mem uintptr, seq, p0, p1, delta int32)
	memorySeqCp        func(mem uintptr, src, dst, p0, p1 int32)
	memorySeqPosMin    func(mem uintptr, seq int32) int32
	memorySeqPosMax    func(mem uintptr, seq int32) int32
	stateSeqGetSize    func(ctx uintptr, seq int32) uintptr
	stateSeqGetData    func(ctx uintptr, dst unsafe.Pointer, size uintptr, seq int32) uintptr
	stateSeqSetData    func(ctx uintptr, src unsafe.Pointer, size uintptr, seq int32) uintptr
	stateSeqSaveFile   func(ctx uintptr, path string, seq int32, tokens unsafe.Pointer, n uintptr) uintptr
	stateSeqLoadFile   func(ctx uintptr, path string, seq int32, tokens unsafe.Pointer, capacity uintptr, n *uintptr) uintptr
	setNThreads        func(ctx uintptr, n, nBatch int32)

	logMu   sync.Mutex
	log     func(level int, msg string)
	lastErr []string
}

var (
	openMu sync.Mutex
	opened *Library
)

// Open loads libllama from o.LibDir (or $KVSTORE_LLAMA_LIB), checks its
// version against ABIVersion, routes its log and loads the ggml backends
// found beside it. Errors wrap ErrNoLibrary or ErrABI; nothing exits the
// process.
func Open(o Options) (*Library, error) {
	dir := o.LibDir
	if dir == "" {
		dir = os.Getenv(LibEnv)
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: no library directory (set Options.LibDir or %s)", ErrNoLibrary, LibEnv)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoLibrary, err)
	}
	if _, err := findLib(dir, "libllama"); err != nil {
		return nil, err
	}
	openMu.Lock()
	defer openMu.Unlock()
	if opened != nil {
		if opened.dir != dir {
			return nil, fmt.Errorf("%w: libllama from %s is loaded already; a process loads one", ErrInvalidArgument, opened.dir)
		}
		opened.setLog(o.Log)
		return opened, nil
	}
	lib, err := open(dir)
	if err != nil {
		return nil, err
	}
	lib.setLog(o.Log)
	opened = lib
	return lib, nil
}

func open(dir string) (*Library, error) {
	llamaPath, err := findLib(dir, "libllama")
	if err != nil {
		return nil, err
	}
	ggmlPath, err := findLib(dir, "libggml")
	if err != nil {
		return nil, err
	}
	hl, err := purego.Dlopen(llamaPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoLibrary, llamaPath, err)
	}
	hg, err := purego.Dlopen(ggmlPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoLibrary, ggmlPath, err)
	}
	lib := &Library{dir: dir}
	var version func() string
	if err := register(hl, "llama_version", &version); err != nil {
		return nil, fmt.Errorf("%w: %s has no llama_version: %v", ErrABI, llamaPath, err)
	}
	// The npm build reports "0.5.0-dev": the base version is the ABI.
	if lib.version = version(); strings.TrimSuffix(lib.version, "-dev") != ABIVersion {
		return nil, fmt.Errorf("%w: %s is llama.cpp %q, this binding reads %q", ErrABI, llamaPath, lib.version, ABIVersion)
	}
	if err := lib.bind(hl, hg); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrABI, llamaPath, err)
	}
	lib.logSet(purego.NewCallback(lib.onLog), 0)
	lib.backendLoadAll(dir)
	return lib, nil
}

// findLib finds prefix.so or prefix.v*.so in dir.
func findLib(dir, prefix string) (string, error) {
	for _, pat := range []string{prefix + ".so", prefix + ".v*.so", prefix + ".so.*"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		if len(m) > 0 {
			return m[0], nil
		}
	}
	return "", fmt.Errorf("%w: no %s*.so in %s", ErrNoLibrary, prefix, dir)
}

func register(h uintptr, name string, fptr any) (err error) {
	sym, err := purego.Dlsym(h, name)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil { // purego panics on a signature it cannot call
			err = fmt.Errorf("%s: %v", name, r)
		}
	}()
	purego.RegisterFunc(fptr, sym)
	return nil
}

func (lib *Library) bind(hl, hg uintptr) error {
	for _, f := range []struct {
		h    uintptr
		name string
		ptr  any
	}{
		{hg, "ggml_backend_load_all_from_path", &lib.backendLoadAll},
		{hl, "llama_log_set", &lib.logSet},
		{hl, "llama_model_default_params", &lib.modelDefaultParams},
		{hl, "llama_context_default_params", &lib.ctxDefaultParams},
		{hl, "llama_model_load_from_file", &lib.modelLoad},
		{hl, "llama_model_free", &lib.modelFree},
		{hl, "llama_init_from_model", &lib.initFromModel},
		{hl, "llama_free", &lib.free},
		{hl, "llama_model_n_layer", &lib.modelNLayer},
		{hl, "llama_model_n_head_kv", &lib.modelNHeadKV},
		{hl, "llama_model_n_head", &lib.modelNHead},
		{hl, "llama_model_n_embd", &lib.modelNEmbd},
		{hl, "llama_model_get_vocab", &lib.modelGetVocab},
		{hl, "llama_vocab_n_tokens", &lib.vocabNTokens},
		{hl, "llama_n_ctx", &lib.nCtx},
		{hl, "llama_get_memory", &lib.getMemory},
		{hl, "llama_decode", &lib.decode},
		{hl, "llama_get_logits_ith", &lib.getLogitsIth},
		{hl, "llama_memory_clear", &lib.memoryClear},
		{hl, "llama_memory_seq_rm", &lib.memorySeqRm},
		{hl, "llama_memory_seq_add", &lib.memorySeqAdd},
		{hl, "llama_memory_seq_cp", &lib.memorySeqCp},
		{hl, "llama_memory_seq_pos_min", &lib.memorySeqPosMin},
		{hl, "llama_memory_seq_pos_max", &lib.memorySeqPosMax},
		{hl, "llama_state_seq_get_size", &lib.stateSeqGetSize},
		{hl, "llama_state_seq_get_data", &lib.stateSeqGetData},
		{hl, "llama_state_seq_set_data", &lib.stateSeqSetData},
		{hl, "llama_state_seq_save_file", &lib.stateSeqSaveFile},
		{hl, "llama_state_seq_load_file", &lib.stateSeqLoadFile},
		{hl, "llama_set_n_threads", &lib.setNThreads},
	} {
		if err := register(f.h, f.name, f.ptr); err != nil {
			return err
		}
	}
	return nil
}

// Version is the library's llama_version().
func (lib *Library) Version() string { return lib.version }

// Dir is the directory the library was loaded from.
func (lib *Library) Dir() string { return lib.dir }

func (lib *Library) setLog(f func(int, string)) {
	lib.logMu.Lock()
	lib.log = f
	lib.logMu.Unlock()
}

// onLog is llama.cpp's log callback: void (int level, const char *text,
// void *user).
func (lib *Library) onLog(level uintptr, text *byte, _ uintptr) uintptr {
	msg := strings.TrimRight(goString(text), "\n")
	lib.logMu.Lock()
	defer lib.logMu.Unlock()
	if lib.log != nil {
		lib.log(int(int32(level)), msg)
	}
	if int32(level) >= 3 && int32(level) <= 4 && msg != "" {
		lib.lastErr = append(lib.lastErr, msg)
		if len(lib.lastErr) > 4 {
			lib.lastErr = lib.lastErr[len(lib.lastErr)-4:]
		}
	}
	return 0
}

// takeLog returns and forgets the last warning and error lines, to
// explain a failed call.
func (lib *Library) takeLog() string {
	lib.logMu.Lock()
	defer lib.logMu.Unlock()
	s := strings.Join(lib.lastErr, "; ")
	lib.lastErr = lib.lastErr[:0]
	if s == "" {
		return "no log"
	}
	return s
}

// goString copies the NUL-terminated C string at b.
func goString(b *byte) string {
	if b == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(b), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(b, n))
}
