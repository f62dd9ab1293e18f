package tier

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// Queue is a durable local queue of packets waiting to be pushed: the
// asynchronous write-through of a Cache (Cache.Queue). Each queued packet
// is one spool file in the queue's directory, holding a whole copy of it,
// so the packet survives a crash and a restart, and evicting its local
// store copy never loses the only one while it waits:
//
//	DIR/<ns hash>-<packet id>.kvtq
//	offset  size  field
//	0       4     header length H, little endian
//	4       H     the tier header object (KVTH, as in the bucket; part CRCs filled in)
//	4+H     P     the payload (P = 2 * layers * chunk length)
//
// A spool file is written to a temporary name, fsynced, renamed and its
// directory fsynced before Add returns; temporaries a crash left are
// removed by OpenQueue. Drain pushes each file, its header and part CRCs
// checked first, and removes it once the tier holds the packet.
type Queue struct {
	dir  string
	tier *Tier
	mu   sync.Mutex    // one Drain at a time
	kick chan struct{} // Add wakes Run
}

const spoolExt = ".kvtq"

// OpenQueue opens (creating it if needed) the queue in dir, pushing to t.
func OpenQueue(dir string, t *Tier) (*Queue, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tier queue %s: %w", dir, err)
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, "*"+spoolExt+".tmp*"))
	for _, f := range tmps {
		os.Remove(f)
	}
	return &Queue{dir: dir, tier: t, kick: make(chan struct{}, 1)}, nil
}

// Add spools packet p durably and returns its id. Adding a packet that is
// queued already replaces nothing: the first copy stays.
func (q *Queue) Add(p *store.Packet) (format.PacketID, error) {
	h, chunks, err := q.tier.describe(p)
	if err != nil {
		return format.PacketID{}, err
	}
	id := format.ComputePacketID(p.Namespace, p.Model.Fingerprint(), p.AdapterID, p.TokenIDs)
	name := filepath.Join(q.dir, nsHash(p.Namespace)+"-"+id.String()+spoolExt)
	if _, err := os.Stat(name); err == nil {
		return id, nil
	}
	buf := make([]byte, h.PartSize)
	for i := range h.Parts() {
		off, n := h.part(i)
		h.PartCRCs[i] = format.CRC(gather(buf[:n], chunks, h.ChunkLen, off))
	}
	hb, err := h.Encode()
	if err != nil {
		return id, err
	}
	if err := writeSpool(name, hb, chunks); err != nil {
		return id, err
	}
	select {
	case q.kick <- struct{}{}:
	default:
	}
	return id, nil
}

// Run drains the queue after every Add and at least every interval, until
// ctx is done; errors are passed to onError (when not nil) and the files
// stay queued for the next round. Start it on its own goroutine.
func (q *Queue) Run(ctx context.Context, every time.Duration, onError func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := q.Drain(ctx); err != nil && onError != nil && ctx.Err() == nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-q.kick:
		case <-t.C:
		}
	}
}

// writeSpool writes a spool file durably: temporary, fsync, rename, fsync
// of the directory.
func writeSpool(name string, header []byte, chunks [][]byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".tmp*")
	if err != nil {
		return fmt.Errorf("tier queue: %w", err)
	}
	defer os.Remove(f.Name()) // after the rename there is nothing to remove
	err = writeAll(f, binary.LittleEndian.AppendUint32(nil, uint32(len(header))), header)
	for _, c := range chunks {
		if err == nil {
			err = writeAll(f, c)
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err == nil {
		err = syncDir(filepath.Dir(name))
	}
	if err != nil {
		return fmt.Errorf("tier queue: spool %s: %w", name, err)
	}
	return nil
}

func writeAll(f *os.File, bs ...[]byte) error {
	for _, b := range bs {
		if _, err := f.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Pending returns the spool files waiting, in name order.
func (q *Queue) Pending() ([]string, error) {
	names, err := filepath.Glob(filepath.Join(q.dir, "*"+spoolExt))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// Drain pushes every queued packet and removes each one the tier then
// holds. It returns the number left and the errors met (each naming its
// file): ErrUnavailable ones will pass later; an ErrCorruption one is a
// damaged spool file, left in place for an operator.
func (q *Queue) Drain(ctx context.Context) (left int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	names, err := q.Pending()
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, name := range names {
		if err := q.push(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("tier queue: %s: %w", filepath.Base(name), err))
			left++
			continue
		}
		if err := os.Remove(name); err != nil {
			errs = append(errs, err)
		}
	}
	if left > 0 || len(errs) > 0 {
		syncDir(q.dir)
	}
	return left, errors.Join(errs...)
}

// push reads one spool file, checks it and pushes the packet it holds.
func (q *Queue) push(ctx context.Context, name string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	h, payload, err := decodeSpool(b)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(filepath.Base(name), nsHash(h.Namespace)+"-") {
		return fmt.Errorf("%w: spool file holds a packet of namespace %q", ErrCorruption, h.Namespace)
	}
	_, _, err = q.tier.Push(ctx, h.packet(payload))
	return err
}

// decodeSpool checks a spool file: its header (DecodeHeader), its length,
// and every part's CRC32C.
func decodeSpool(b []byte) (*Header, []byte, error) {
	if len(b) < 4 || uint64(binary.LittleEndian.Uint32(b)) > uint64(len(b)-4) {
		return nil, nil, fmt.Errorf("%w: spool file of %d bytes: bad header length", ErrCorruption, len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	h, err := DecodeHeader(b[4 : 4+n])
	if err != nil {
		return nil, nil, err
	}
	payload := b[4+n:]
	if uint64(len(payload)) != h.PayloadLen() {
		return nil, nil, fmt.Errorf("%w: spool payload of %d bytes, header says %d", ErrCorruption, len(payload), h.PayloadLen())
	}
	for i := range h.Parts() {
		off, n := h.part(i)
		if c := format.CRC(payload[off : off+n]); c != h.PartCRCs[i] {
			return nil, nil, fmt.Errorf("%w: spool part %d: CRC32C %08x, header says %08x", ErrCorruption, i, c, h.PartCRCs[i])
		}
	}
	return h, payload, nil
}
