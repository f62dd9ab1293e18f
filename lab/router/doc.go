// Package router trains SeKV's zoom-in routers: per (layer, KV head) the
// routing projection W (d' x head_dim), the bias b and the threshold tau
// of
//
//	alpha_s = sigmoid(max_h (W q_h) . (W k_s) + b),   z_s = [alpha_s > tau]
//
// (reconstruct.Router.Route with Scale 1, a trained W projecting both the
// pre-RoPE queries q_h of the KV head's query heads and the spans' summary
// keys k_s, as spanmem.Routing re-projects them), with the base model
// frozen. The objective (Loss) is a zoom BCE against the teacher's
// attention mass per span and a budget penalty on straight-through zoom
// decisions; the gradients are analytic and checked by finite
// differences; Train minimises it with Adam. docs/decisions.md ("Trained
// SeKV routers") records what differs from the paper and why.
//
// The training data (Example) is built by lab/quality from the model's
// decode steps over a context's span memory; the trained routers are
// stored as the store's router artifacts (Artifacts).
package router
