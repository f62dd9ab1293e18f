package s3test

import (
	"net/http"
	"testing"
)

// TestStartStop: the server answers once Start returns, a bucket can be
// created, and after Stop (twice) nothing answers.
func TestStartStop(t *testing.T) {
	s := Start(t)
	s.CreateBucket(t, "bucket-1")
	resp, err := http.Get(s.Endpoint + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("health after Start: %v, %v", resp, err)
	}
	resp.Body.Close()
	s.Stop()
	s.Stop()
	if resp, err := http.Get(s.Endpoint + "/health"); err == nil {
		resp.Body.Close()
		t.Fatal("server still answers after Stop")
	}
}
