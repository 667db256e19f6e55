package control

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// TargetGroup is one entry of Prometheus's HTTP service discovery
// (http_sd_configs): the targets to scrape (host:port of a node's HTTP
// endpoint, which serves /metrics) and the labels Prometheus attaches to
// them. Labels beginning with "__meta_" are only visible to relabelling.
type TargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// Targets lists one target group per member that registered an HTTP
// endpoint (Member.HTTP), sorted by node id, with the labels
//
//	farm                      the farm id
//	node                      the member's node id
//	roles                     its roles, e.g. "ru,bu,em"
//	__meta_sluice_incarnation its incarnation (lease id, hex)
//	__meta_sluice_address     its peer transport address
//	__meta_sluice_sources     the sources it reads out ("" when none)
//	__meta_sluice_em          "true" for the event manager, else "false"
//
// A member without an HTTP endpoint (http.address off) is left out and
// counted in skipped. Errors: etcd's.
func (c *Client) Targets(ctx context.Context) (groups []TargetGroup, skipped int, err error) {
	members, _, err := c.Members(ctx)
	if err != nil {
		return nil, 0, err
	}
	leader, lead, err := c.Leader(ctx)
	if err != nil {
		return nil, 0, err
	}
	groups = []TargetGroup{} // "[]", never "null": Prometheus wants a list
	for _, m := range members {
		if m.HTTP == "" {
			skipped++
			continue
		}
		groups = append(groups, TargetGroup{Targets: []string{m.HTTP}, Labels: map[string]string{
			"farm":                      c.farm,
			"node":                      m.Node,
			"roles":                     m.Roles,
			"__meta_sluice_incarnation": strconv.FormatUint(uint64(m.Incarnation), 16),
			"__meta_sluice_address":     m.Address,
			"__meta_sluice_sources":     m.Sources,
			"__meta_sluice_em":          strconv.FormatBool(lead && leader.Incarnation == m.Incarnation),
		}})
	}
	return groups, skipped, nil
}

// SDHandler serves Targets as Prometheus HTTP service discovery: GET
// answers 200 with Content-Type application/json and the JSON list of
// target groups, read from etcd on every request (Prometheus asks every
// refresh_interval, 60 s by default); 503 with the error as text when
// etcd does not answer within timeout (Prometheus keeps the targets it
// had). Members without an HTTP endpoint are logged at debug level.
func SDHandler(c *Client, timeout time.Duration, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		groups, skipped, err := c.Targets(ctx)
		if err != nil {
			log.Warn("farm sd: members", "err", err)
			http.Error(w, fmt.Sprintf("farm %s: %v", c.farm, err), http.StatusServiceUnavailable)
			return
		}
		if skipped > 0 {
			log.Debug("farm sd: members without an HTTP endpoint left out", "members", skipped)
		}
		b, err := json.Marshal(groups)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(b, '\n'))
	})
}
