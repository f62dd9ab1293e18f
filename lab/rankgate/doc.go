// Package rankgate trains SeKV's rank gate g_phi, the network that picks
// each span's factor rank from its singular spectrum, with the base model
// frozen. g_phi is a small MLP shared by every (layer, KV head) and by
// keys and values: its input is a span's normalised singular values and
// their log energies, the energy past r_max, the span's length and width,
// the layer and K|V (store.RankGate.Features); its output is one gate
// m_i in (0, 1) per component. A Sample is one factored span's K or V rows
// in one (layer, KV head), reduced to what the loss needs: the energies
// e_i = s_i^2 / ||X||_F^2 and the bytes of a component. The loss
// (Sample.Loss) is the relative squared error of the rows with gated
// singular values, sum_i (1 - m_i)^2 e_i plus the energy past r_max, exact
// from the spectrum, plus lambda times the expected stored bytes,
// sum_i m_i x bytes per component over the span's raw bf16 bytes.
// Params.Grad is its analytic gradient (checked against finite
// differences), Train an Adam loop over samples that stops on a cancelled
// context and resumes from its State.
//
// ContextSamples prefills a context on a model and cuts it as
// spanmem.Build does (surprisal segmentation, pre-RoPE keys, the same SVD
// and seeds); Evaluate scores a Policy (GatePolicy, the store's rule;
// EnergyPolicy, the energy threshold) per span, and MatchEnergy finds the
// energy threshold of equal total bytes. The trained gate is stored as the
// model's store.ArtifactRankGate, which store.DB.BuildSpanMemory then
// applies.
package rankgate
