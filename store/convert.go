package store

// The store's public types are its own, with their fields documented in
// place; the internal packages that fill them have types of the same
// shape. Each public type has small from/to functions beside it that
// convert at the boundary; mapSlice applies one to a slice.

// mapSlice returns f of every element of in, nil for nil (so that a report
// encodes the same whether it came from the internal package or not).
func mapSlice[S, T any](in []S, f func(S) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i, x := range in {
		out[i] = f(x)
	}
	return out
}
