// Package fill makes a node's deferral fill-aware: it tells the
// accelerator's state (is the beam in STABLE BEAMS, when does the fill end,
// when does the next one begin) and plans the fraction of events the node
// defers so that the deferred backlog is replayed in the coming inter-fill
// and fits the store's budget.
//
// # Sources
//
// The state comes from one of (Config): a schedule file (ScheduleFile:
// the fills, or the beam modes), an HTTP endpoint answering a Document, or
// an etcd key holding a Document or a bare mode. Only STABLE BEAMS is a
// fill (Mode.Beam); every other LHC mode is inter-fill time. A source that
// fails leaves the last state standing; one that has no state (a modes
// schedule before its first entry, an etcd key not written) is unknown,
// and the stage's configured fraction stands.
//
// # The plan
//
// In a fill, with R the replay rate (events/s, measured; replay.rate
// until a pass measured it), λ the events/s the planned stage sees, d the
// events/s deferred for other reasons (the plugins' own deferrals,
// backlog overflow, trigger errors), T the time left in the fill, G the
// length of the inter-fill after it, B the backlog (events), e the mean
// stored event size, a the share of the events decided online that are
// accepted (stored), H the store's headroom and M max_backlog_bytes:
//
//	inter-fill:     f ≤ (R·G·safety − B − d·T) / (λ·T)
//	store budget:   f·λT·e + (1−f)·a·λT·e ≤ H·store_share
//	backlog budget: f·λT·e ≤ M·store_share − B·e
//
// f is the smallest of the three, clamped to [min_fraction,
// max_fraction]; the reason is the bound that set it (Reason). The plan is
// made again every poll, so an estimate that was off is corrected as the
// backlog grows: a late part of a fill defers less when its start
// deferred more than planned. Out of a fill the fraction is min_fraction
// and the node replays (Reason beam-off); its figures say how long the
// backlog takes and when the next fill begins.
//
// The package knows nothing of the node: the node feeds Plan its
// measurements (Inputs) and applies the fraction.
package fill
