package store

import (
	"bytes"
	"log/slog"
	"testing"
)

// The library logs nothing by default: an Open with no Logger must not write
// an Info line into the host's slog.Default().
func TestDefaultLoggerSilent(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(prev)
	dir := t.TempDir()
	db, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, nil); err != nil { // a reopen logs its recovery facts
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("Open with the default Logger wrote to slog.Default():\n%s", buf.String())
	}
}
