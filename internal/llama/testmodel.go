package llama

import (
	"os"
	"path/filepath"
)

// TestModelPath locates the stories260K test checkpoint: $KVSTORE_TESTMODEL
// when set, else <module root>/../shared/testdata/stories260K.bin, the
// module root found by walking up from the working directory to go.mod.
// ok reports whether a file is there.
func TestModelPath() (path string, ok bool) {
	if p := os.Getenv("KVSTORE_TESTMODEL"); p != "" {
		return p, isFile(p)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if isFile(filepath.Join(dir, "go.mod")) {
			p := filepath.Join(dir, "..", "shared", "testdata", "stories260K.bin")
			return p, isFile(p)
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
