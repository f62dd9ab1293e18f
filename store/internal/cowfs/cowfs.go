// Package cowfs is a file system (vfs.FS) that reads a base file system and
// keeps every change in memory: a file created, written, renamed, linked
// or removed through it lives, or is gone, only in a vfs.MemFS layered over
// the base, which is never written. A base file is copied into memory the
// first time it is opened for writing or renamed ("copy up"); until then
// reads go to the base.
//
// The store opens the catalog of a read-only store on it when the catalog
// lags the blob log after a crash (store/reconcile.go): Pebble opens it
// read-write, the reconciled batch is committed into memory, the store
// serves it, and nothing reaches the disk. Pebble's writes on such an open
// are small (a WAL, a MANIFEST, an OPTIONS file, the LOCK); its tables are
// read from the base in place.
//
// Paths are the base's (PathJoin, PathBase and PathDir are the base's); a
// base path removed through the FS is remembered as gone, with everything
// below it. It is safe for concurrent use.
package cowfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS layers an in-memory file system over a base; New makes one.
type FS struct {
	base vfs.FS
	mem  *vfs.MemFS

	mu   sync.Mutex
	gone map[string]bool // base paths removed or moved away through FS
}

var _ vfs.FS = (*FS)(nil)

// New returns an FS over base, with no change yet.
func New(base vfs.FS) *FS {
	return &FS{base: base, mem: vfs.NewMem(), gone: map[string]bool{}}
}

// inMem reports whether name exists in the memory layer.
func (c *FS) inMem(name string) bool {
	_, err := c.mem.Stat(name)
	return err == nil
}

// goneLocked reports whether name, or a directory above it, was removed
// from the base through c (c.mu held).
func (c *FS) goneLocked(name string) bool {
	for p := name; ; {
		if c.gone[p] {
			return true
		}
		up := c.base.PathDir(p)
		if up == p || up == "" || up == "." {
			return false
		}
		p = up
	}
}

func notExist(op, name string) error {
	return &os.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

// parent makes name's directory in the memory layer.
func (c *FS) parent(name string) error {
	return c.mem.MkdirAll(c.base.PathDir(name), 0o755)
}

// copyUpLocked copies base file name into the memory layer unless it is
// there already (c.mu held). It fails with fs.ErrNotExist when neither
// layer has it.
func (c *FS) copyUpLocked(op, name string) error {
	if c.inMem(name) {
		return nil
	}
	if c.goneLocked(name) {
		return notExist(op, name)
	}
	src, err := c.base.Open(name)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := c.parent(name); err != nil {
		return err
	}
	dst, err := c.mem.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		return err
	}
	return dst.Close()
}

// Create creates name in memory (shadowing a base file of that name).
func (c *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.parent(name); err != nil {
		return nil, err
	}
	c.gone[name] = true // the base file, if any, is replaced
	return c.mem.Create(name, category)
}

// Link links newname to oldname in memory, copying oldname up first.
func (c *FS) Link(oldname, newname string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.copyUpLocked("link", oldname); err != nil {
		return err
	}
	if err := c.parent(newname); err != nil {
		return err
	}
	c.gone[newname] = true
	return c.mem.Link(oldname, newname)
}

// Open opens name for reading: the memory layer's file if it has one, else
// the base's, unless it is gone.
func (c *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inMem(name) {
		return c.mem.Open(name, opts...)
	}
	if c.goneLocked(name) {
		return nil, notExist("open", name)
	}
	return c.base.Open(name, opts...)
}

// OpenReadWrite opens name for reading and writing in memory, copying a
// base file up first, creating it if neither layer has it.
func (c *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.copyUpLocked("open", name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := c.parent(name); err != nil {
		return nil, err
	}
	c.gone[name] = true
	return c.mem.OpenReadWrite(name, category, opts...)
}

// OpenDir opens directory name (for Sync, which is a no-op in memory); it
// must exist in one of the layers.
func (c *FS) OpenDir(name string) (vfs.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inMem(name) {
		if c.goneLocked(name) {
			return nil, notExist("open", name)
		}
		st, err := c.base.Stat(name)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			return nil, &os.PathError{Op: "open", Path: name, Err: errors.New("not a directory")}
		}
		if err := c.mem.MkdirAll(name, 0o755); err != nil {
			return nil, err
		}
	}
	return c.mem.OpenDir(name)
}

// Remove removes name from the memory layer and hides the base's.
func (c *FS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inMem := c.inMem(name)
	inBase := false
	if !c.goneLocked(name) {
		_, err := c.base.Stat(name)
		inBase = err == nil
	}
	if !inMem && !inBase {
		return notExist("remove", name)
	}
	if inMem {
		if err := c.mem.Remove(name); err != nil {
			return err
		}
	}
	c.gone[name] = true
	return nil
}

// RemoveAll removes name and everything below it, in both layers' views.
func (c *FS) RemoveAll(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.mem.RemoveAll(name); err != nil {
		return err
	}
	c.gone[name] = true
	return nil
}

// Rename moves oldname to newname in memory, copying a base file up first.
func (c *FS) Rename(oldname, newname string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.copyUpLocked("rename", oldname); err != nil {
		return err
	}
	if err := c.parent(newname); err != nil {
		return err
	}
	if err := c.mem.Rename(oldname, newname); err != nil {
		return err
	}
	c.gone[oldname], c.gone[newname] = true, true
	return nil
}

// ReuseForWrite renames oldname to newname and opens it for writing, in
// memory.
func (c *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := c.Rename(oldname, newname); err != nil {
		return nil, err
	}
	return c.mem.OpenReadWrite(newname, category)
}

// MkdirAll makes dir in the memory layer.
func (c *FS) MkdirAll(dir string, perm os.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mem.MkdirAll(dir, perm) // a removed base directory's files stay gone
}

// Lock locks name in memory: the base's lock file is neither taken nor
// written.
func (c *FS) Lock(name string) (io.Closer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.parent(name); err != nil {
		return nil, err
	}
	return c.mem.Lock(name)
}

// List lists dir: the base's names not gone, and the memory layer's.
func (c *FS) List(dir string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	found := false
	if !c.goneLocked(dir) {
		if ns, err := c.base.List(dir); err == nil {
			found = true
			for _, n := range ns {
				if !c.gone[c.base.PathJoin(dir, n)] {
					names = append(names, n)
				}
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if ns, err := c.mem.List(dir); err == nil {
		found = true
		names = append(names, ns...)
	}
	if !found {
		return nil, notExist("open", dir)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Stat returns name's FileInfo from the memory layer, else the base's.
func (c *FS) Stat(name string) (vfs.FileInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, err := c.mem.Stat(name); err == nil {
		return st, nil
	}
	if c.goneLocked(name) {
		return nil, notExist("stat", name)
	}
	return c.base.Stat(name)
}

// PathBase is the base's.
func (c *FS) PathBase(path string) string { return c.base.PathBase(path) }

// PathJoin is the base's.
func (c *FS) PathJoin(elem ...string) string { return c.base.PathJoin(elem...) }

// PathDir is the base's.
func (c *FS) PathDir(path string) string { return c.base.PathDir(path) }

// GetDiskUsage is the base's.
func (c *FS) GetDiskUsage(path string) (vfs.DiskUsage, error) { return c.base.GetDiskUsage(path) }

// Unwrap returns nil: FS is not a plain wrapper of the base.
func (c *FS) Unwrap() vfs.FS { return nil }
