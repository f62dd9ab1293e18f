package adapter

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
)

// ErrTooLarge is ReadFile's error for a file or adapter over the artifact
// limit; it wraps format.ErrInvalidArgument.
var ErrTooLarge = fmt.Errorf("%w: adapter over the %d-byte artifact limit", format.ErrInvalidArgument, format.MaxArtifactSize)

// ReadFile reads an adapter from the safetensors file at path (the files
// Decode reads). An adapter is stored as its F32 safetensors file, which
// must fit format.MaxArtifactSize, so a file larger than that is refused
// from its size before any byte is read, and the read itself stops at the
// size found (a file that grows meanwhile is refused too); an adapter
// whose F32 values would not fit is refused before they are converted.
// Memory stays in proportion to the limit, whatever the file claims.
// Errors: ErrTooLarge, format.ErrInvalidArgument for a path that is not a
// regular file, Decode's format.ErrCorruption, and the file system's.
func ReadFile(path string) (*Adapter, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case st.IsDir():
		return nil, fmt.Errorf("%w: %s is a directory, not a safetensors file", format.ErrInvalidArgument, path)
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file", format.ErrInvalidArgument, path)
	case st.Size() > format.MaxArtifactSize:
		return nil, fmt.Errorf("%s: %d bytes: %w", path, st.Size(), ErrTooLarge)
	}
	b := make([]byte, st.Size()+1) // one more, to see a file that grew
	n, err := io.ReadFull(f, b)
	switch {
	case n == len(b):
		return nil, fmt.Errorf("%s: grew past %d bytes while being read: %w", path, st.Size(), ErrTooLarge)
	case err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	sf, err := safetensors.Decode(b[:n])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var values uint64
	for _, t := range sf.Tensors {
		if size := t.DType.Size(); size > 0 {
			values += uint64(len(t.Data) / size)
		}
	}
	if 4*values > format.MaxArtifactSize {
		return nil, fmt.Errorf("%s: %d values take %d bytes as F32: %w", path, values, 4*values, ErrTooLarge)
	}
	a, err := fromFile(sf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}
