package store

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// TestConcurrentReadersAndWriters runs writers (Put, Delete) and readers
// (Get, Layer, Has, List, Stats) at once; the race detector watches, and
// every byte read must be the byte put.
func TestConcurrentReadersAndWriters(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			db, _, _ := openKind(t, k.disk, k.noMmap)
			defer db.Close()
			spec := testSpec(format.DTypeBF16, 2, 2, 8)
			fp := spec.Fingerprint()
			const writers, perWriter, readers = 3, 8, 3
			packets := make([][]*Packet, writers)
			for w := range packets {
				for i := range perWriter {
					packets[w] = append(packets[w], randPacket(spec, "ns", 20+i*10, uint64(w*100+i)))
				}
			}
			byID := map[format.PacketID]*Packet{}
			for _, ps := range packets {
				for _, p := range ps {
					byID[format.ComputePacketID("ns", fp, "", p.TokenIDs)] = p
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, writers+readers)
			done := make(chan struct{})
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i, p := range packets[w] {
						id, err := db.Put(context.Background(), p)
						if err != nil {
							errs <- err
							return
						}
						if i%4 == 3 { // delete some, possibly under a reader's view
							if err := db.Delete(context.Background(), "ns", fp, id); err != nil {
								errs <- err
								return
							}
						}
					}
				}()
			}
			var rg sync.WaitGroup
			for range readers {
				rg.Add(1)
				go func() {
					defer rg.Done()
					for {
						select {
						case <-done:
							return
						default:
						}
						if err := readAll(db, fp, byID); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(done)
			rg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if s := db.Stats(); s.Packets != writers*(perWriter-perWriter/4) || s.OpenViews != 0 {
				t.Fatalf("stats after the run: %+v", s)
			}
		})
	}
}

// readAll lists the namespace and reads every packet it finds; a packet
// deleted in between may be missing, nothing may be wrong.
func readAll(db *DB, fp format.Fingerprint, byID map[format.PacketID]*Packet) error {
	ids, _, err := db.List("ns", fp, nil, 1000)
	if err != nil {
		return err
	}
	_ = db.Stats()
	for _, id := range ids {
		v, err := db.Get(context.Background(), "ns", fp, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		p := byID[id]
		for l := range p.Layers {
			k, val, err := v.Layer(l)
			if err != nil {
				v.Release()
				return err
			}
			if !bytes.Equal(k, p.Layers[l].K) || !bytes.Equal(val, p.Layers[l].V) {
				v.Release()
				return errors.New("concurrent read returned wrong bytes")
			}
		}
		v.Release()
	}
	return nil
}
