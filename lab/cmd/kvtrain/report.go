package main

import (
	"encoding/json"
	"fmt"
	"io"
)

// report is what adapter prints: the stored adapter and how training went
// (the fields and JSON names of kvstore adapter import's report).
type report struct {
	ID          string    `json:"id"`
	Model       string    `json:"model_fingerprint"`
	Header      int       `json:"header_rows"`
	Trailer     int       `json:"trailer_rows"`
	Bytes       int       `json:"bytes"`
	EpochLoss   []float64 `json:"epoch_loss,omitempty"`
	TrainSecond float64   `json:"train_seconds,omitempty"`
}

// write prints r as JSON, or as text.
func (r *report) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "adapter    %s\nmodel      %s\nrows       %d header + %d trailer (%d bytes f32)\n", r.ID, r.Model, r.Header, r.Trailer, r.Bytes)
	if len(r.EpochLoss) > 0 {
		fmt.Fprintf(w, "loss       %.4f (first epoch) -> %.4f (last), %d epochs in %.1f s\n", r.EpochLoss[0], r.EpochLoss[len(r.EpochLoss)-1], len(r.EpochLoss), r.TrainSecond)
	}
	return nil
}
