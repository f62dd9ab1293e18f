package segment

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// Defaults for Options. Alpha = 1 is SeKV's surprisal sensitivity; the span
// lengths are chosen for storage: rank-32 factors of a 128-dim head only
// take less room than the raw rows once a span is longer than about 40
// tokens, so spans are kept at least DefaultMinSpan long and split past
// DefaultMaxSpan to bound one factorisation's cost.
const (
	DefaultAlpha       = 1.0
	DefaultAnchorAlpha = 2.0
	DefaultSinks       = 4
	DefaultMinSpan     = 16
	DefaultMaxSpan     = 512
	DefaultMinFactored = 4
)

// Options configures Split. The zero value, after EnsureDefaults, is the
// default segmentation.
type Options struct {
	// Alpha sets the boundary threshold mu + Alpha*sigma. 0 means
	// DefaultAlpha. Any finite value is allowed.
	Alpha float64
	// AnchorAlpha sets the second threshold mu + AnchorAlpha*sigma above
	// which a token is an anchor even when it starts no span (a boundary
	// suppressed by MinSpan, or any token when AnchorAlpha < Alpha).
	// 0 means DefaultAnchorAlpha.
	AnchorAlpha float64
	// Sinks is the number of leading tokens always kept as anchors
	// (attention sinks). 0 means DefaultSinks; a negative value means none.
	Sinks int
	// MinSpan is the shortest span a surprisal boundary may close: a
	// boundary fewer than MinSpan tokens after the current span's start is
	// suppressed (the span goes on). Only the last span, cut by the end of
	// the sequence, can be shorter. 0 means DefaultMinSpan; 1 keeps every
	// boundary.
	MinSpan int
	// MaxSpan is the longest span: longer ones are cut into the fewest
	// near-equal pieces of at most MaxSpan tokens. 0 means DefaultMaxSpan.
	// It must be at least 2*MinSpan, so that pieces are never shorter than
	// MinSpan.
	MaxSpan int
	// MinFactored is the shortest span that is factored; shorter spans are
	// marked Factored = false and stay at full resolution. 0 means
	// DefaultMinFactored.
	MinFactored int
}

// EnsureDefaults replaces zero fields by their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Alpha == 0 {
		o.Alpha = DefaultAlpha
	}
	if o.AnchorAlpha == 0 {
		o.AnchorAlpha = DefaultAnchorAlpha
	}
	if o.Sinks == 0 {
		o.Sinks = DefaultSinks
	}
	if o.MinSpan == 0 {
		o.MinSpan = DefaultMinSpan
	}
	if o.MaxSpan == 0 {
		o.MaxSpan = DefaultMaxSpan
	}
	if o.MinFactored == 0 {
		o.MinFactored = DefaultMinFactored
	}
	return o
}

// Validate checks options that have had their defaults applied. Errors wrap
// format.ErrInvalidArgument.
func (o *Options) Validate() error {
	bad := func(what string, args ...any) error {
		return fmt.Errorf("%w: segment options: %s", format.ErrInvalidArgument, fmt.Sprintf(what, args...))
	}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case !finite(o.Alpha) || !finite(o.AnchorAlpha):
		return bad("alpha %v and anchor alpha %v must be finite", o.Alpha, o.AnchorAlpha)
	case o.MinSpan < 1:
		return bad("min span %d < 1", o.MinSpan)
	case o.MaxSpan < 2*o.MinSpan:
		return bad("max span %d < 2 * min span %d", o.MaxSpan, o.MinSpan)
	case o.MinFactored < 1:
		return bad("min factored %d < 1", o.MinFactored)
	}
	return nil
}
