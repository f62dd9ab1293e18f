package admin

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/kvstore/kvstore/store"
)

// A cursor names a row of a List or ContextList: its namespace and its
// packet id or context name, each path-escaped, joined by "/" ("a/3174…",
// "team%2Fx/notes"), so that it survives a command line and a URL. Rows
// after it are those later in catalog order, which sorts a namespace or a
// name by its length first (the catalog keys are length-prefixed), then by
// its bytes.
type cursor struct{ ns, key string }

func (c cursor) String() string { return url.PathEscape(c.ns) + "/" + url.PathEscape(c.key) }

// parseCursor reads a cursor; "" is none (ok false). A malformed one is
// store.ErrInvalidArgument.
func parseCursor(s string) (c cursor, ok bool, err error) {
	if s == "" {
		return c, false, nil
	}
	ns, key, found := strings.Cut(s, "/")
	if found {
		if c.ns, err = url.PathUnescape(ns); err == nil {
			c.key, err = url.PathUnescape(key)
		}
	}
	if !found || err != nil || strings.Contains(key, "/") {
		return c, false, fmt.Errorf("%w: after %q: want a cursor NAMESPACE/KEY as a list's \"next\" gives it", store.ErrInvalidArgument, s)
	}
	return c, true, nil
}

// after reports whether c comes after b in catalog order.
func (c cursor) after(b cursor) bool {
	if d := compareKey(c.ns, b.ns); d != 0 {
		return d > 0
	}
	return compareKey(c.key, b.key) > 0
}

// compareKey orders two strings as their length-prefixed catalog keys do.
func compareKey(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// checkModel refuses a model filter that is not a hex prefix of a
// fingerprint (store.ErrInvalidArgument): it would match nothing.
func checkModel(model string) error {
	if len(model) > 64 || strings.Trim(strings.ToLower(model), "0123456789abcdef") != "" {
		return fmt.Errorf("%w: model %q: want a hex prefix of a model fingerprint (up to 64 digits)", store.ErrInvalidArgument, model)
	}
	return nil
}
