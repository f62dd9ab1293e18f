package s3test

import "testing"

// TestSeaweedKillRestart: the cluster starts with both volume servers
// counted and a bucket that takes writes; after a SIGKILL the master
// counts one, after the restart two again, and the bucket still serves.
func TestSeaweedKillRestart(t *testing.T) {
	sw := StartSeaweed(t)
	sw.CreateBucket(t, "bucket-1")
	sw.Volumes[1].Kill()
	if sw.Volumes[1].Running() {
		t.Fatal("volume server 1 still running after Kill")
	}
	sw.WaitVolumeServers(t, 1)
	sw.Volumes[1].Restart(t)
	sw.WaitVolumeServers(t, 2)
	sw.CreateBucket(t, "bucket-1") // exists: probe written and read back again
	sw.Stop()
	sw.Stop()
	if sw.Master.Running() || sw.Filer.Running() {
		t.Fatal("processes still running after Stop")
	}
}
