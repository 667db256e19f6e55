package control

import (
	"context"

	"github.com/sluice-daq/sluice/node/farm"
)

// Status is what `sluice farm status` shows: who is in the farm, who
// leads, what run is asked for, and the run's farm ledger once the EM
// published one.
type Status struct {
	Farm     string              `json:"farm"`
	Members  []Member            `json:"members"`
	EM       *Leader             `json:"em"`
	Run      *RunState           `json:"run"`
	Config   *farm.RunConfig     `json:"config,omitempty"`
	Reserved uint64              `json:"reserved"` // assignment ids below this may have been used
	Ledger   *farm.LedgerSummary `json:"ledger,omitempty"`
	Mask     *RunMask            `json:"mask,omitempty"` // what run control masked of the run
}

// Status reads the farm's status from etcd.
func (c *Client) Status(ctx context.Context) (Status, error) {
	st := Status{Farm: c.farm}
	var err error
	if st.Members, _, err = c.Members(ctx); err != nil {
		return st, err
	}
	if l, ok, err := c.Leader(ctx); err != nil {
		return st, err
	} else if ok {
		st.EM = &l
	}
	if st.Reserved, err = c.Reserved(ctx); err != nil {
		return st, err
	}
	rs, ok, err := c.RunState(ctx)
	if err != nil || !ok {
		return st, err
	}
	st.Run = &rs
	if cfg, _, err := c.RunConfig(ctx, rs.Run); err == nil {
		st.Config = &cfg
	}
	if l, ok, err := c.Ledger(ctx, rs.Run); err != nil {
		return st, err
	} else if ok {
		st.Ledger = &l
	}
	if m, ok, err := c.RunMask(ctx, rs.Run); err != nil {
		return st, err
	} else if ok {
		st.Mask = &m
	}
	return st, nil
}
