package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// TestReliabilityConcurrentCompaction runs writers (Put, Delete), readers
// (Get with every chunk compared, Assemble, List, Verify) and a compactor
// (Compact of every file with a dead byte, GC) at once, under the race
// detector: no read returns wrong bytes, no live packet is ever missing,
// and afterwards Check finds nothing and every surviving packet is exact.
func TestReliabilityConcurrentCompaction(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			db, _, _ := openKind(t, k.disk, k.noMmap)
			defer db.Close()
			spec := testSpec(format.DTypeBF16, 2, 2, 8)
			fp := spec.Fingerprint()
			const writers, perWriter = 3, 12
			packets := map[format.PacketID]*Packet{}
			var plan [writers][]*Packet
			for w := range writers {
				for i := range perWriter {
					p := floatPacket(spec, "ns", 30+(i*53)%200, 0, 0, uint64(w*1000+i))
					plan[w] = append(plan[w], p)
					packets[format.ComputePacketID("ns", fp, "", p.TokenIDs)] = p
				}
			}
			// kept packets are never deleted: readers require them once put.
			var kept sync.Map
			var wg, bg sync.WaitGroup
			errs := make(chan error, 16)
			done := make(chan struct{})
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i, p := range plan[w] {
						id, err := db.Put(context.Background(), p)
						if err != nil {
							errs <- err
							return
						}
						if i%3 != 0 {
							kept.Store(id, p)
						} else if err := db.Delete(context.Background(), "ns", fp, id); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			var compactions, reads atomic.Int64
			loop := func(f func() error) {
				bg.Add(1)
				go func() {
					defer bg.Done()
					for {
						select {
						case <-done:
							return
						default:
						}
						if err := f(); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			loop(func() error {
				if _, err := db.Compact(context.Background(), CompactOptions{LiveRatio: 1}); err != nil {
					return fmt.Errorf("compact: %w", err)
				}
				_, err := db.GC(context.Background(), GCOptions{})
				compactions.Add(1)
				return err
			})
			loop(func() error { reads.Add(1); return readKept(db, &kept) })
			loop(func() error { reads.Add(1); return readAll(db, fp, packets) })
			loop(func() error { return assembleKept(db, spec, &kept) })
			loop(func() error {
				rep, err := db.Verify(context.Background(), VerifyOptions{})
				if err == nil && !rep.OK() {
					err = fmt.Errorf("verify during compaction: %v", rep.Findings)
				}
				return err
			})
			wg.Wait()
			close(done)
			bg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if _, err := db.Compact(context.Background(), CompactOptions{LiveRatio: 1}); err != nil {
				t.Fatal(err)
			}
			rep, err := db.Check(context.Background(), CheckOptions{})
			if err != nil || !rep.OK() {
				t.Fatalf("Check = %v, findings %v", err, rep.Findings)
			}
			n := 0
			kept.Range(func(k, v any) bool {
				checkPacket(t, db, v.(*Packet), k.(format.PacketID))
				n++
				return true
			})
			t.Logf("%d writers, %d packets kept, %d compaction+GC rounds and %d read sweeps ran concurrently", writers, n, compactions.Load(), reads.Load())
		})
	}
}

// readKept reads every kept packet: each must be there and exact.
func readKept(db *DB, kept *sync.Map) error {
	var err error
	kept.Range(func(k, v any) bool {
		if out, e := readBack(db, v.(*Packet), k.(format.PacketID)); out != readExact {
			err = fmt.Errorf("kept packet %s: %v (%v)", k.(format.PacketID).Short(), out, e)
		}
		return err == nil
	})
	return err
}

// assembleKept assembles up to two kept packets; V rows must be theirs.
func assembleKept(db *DB, spec *format.ModelSpec, kept *sync.Map) error {
	var items []AssembleItem
	var ps []*Packet
	tokens := 0
	kept.Range(func(k, v any) bool {
		p := v.(*Packet)
		items = append(items, AssembleItem{ID: k.(format.PacketID), Offset: int64(tokens)})
		ps = append(ps, p)
		tokens += p.Tokens()
		return len(items) < 2
	})
	if len(items) == 0 {
		return nil
	}
	d := NewContiguousDest(spec, tokens)
	if err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), items, d, nil); err != nil {
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("assemble lost a kept packet: %w", err)
		}
		return err
	}
	row := spec.HeadDim * spec.DType.Size()
	at := 0
	for h := range spec.KVHeads {
		for _, p := range ps {
			n := p.Tokens() * row
			if string(d.V[1][at:at+n]) != string(p.Layers[1].V[h*n:(h+1)*n]) {
				return errors.New("concurrent assemble returned wrong V rows")
			}
			at += n
		}
	}
	return nil
}
