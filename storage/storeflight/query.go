package storeflight

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluice-daq/sluice/storage"
)

// Version is the protocol's (the Query's "version").
const Version = 1

// MaxList bounds the events one "ls" action returns.
const MaxList = 1 << 20

// Actions.
const (
	ActionStat = "stat"
	ActionList = "ls"
	// ActionLines: the trigger line names the store recorded, by stage.
	ActionLines = "lines"
	// ActionWhy: one event's provenance (storage.Why), body a WhyQuery.
	ActionWhy = "why"
)

// WhyQuery names the event of a "why" action.
type WhyQuery struct {
	Version int    `json:"version"`
	Run     uint32 `json:"run"`
	Event   uint64 `json:"event"`
}

// EndpointFile is the name of the file in the store's directory that
// names the serving endpoint (see the package doc).
const EndpointFile = "FLIGHT"

// Sentinel errors.
var (
	// ErrBadQuery: a ticket or action body that is not a valid Query.
	ErrBadQuery = errors.New("storeflight: bad query")
	// ErrNoEndpoint: the store's directory names no Flight endpoint.
	ErrNoEndpoint = errors.New("storeflight: no Flight endpoint")
)

// Query selects events of one stream (a DoGet ticket, an "ls" body).
type Query struct {
	Version  int    `json:"version"`
	Stream   string `json:"stream"`
	MinRun   uint32 `json:"min_run,omitempty"`
	MaxRun   uint32 `json:"max_run,omitempty"`
	MinEvent uint64 `json:"min_event,omitempty"`
	MaxEvent uint64 `json:"max_event,omitempty"`
	Limit    int    `json:"limit,omitempty"`
}

// QueryOf is the query of stream's events in sel, at most limit (0: all).
func QueryOf(stream storage.Stream, sel storage.Selection, limit int) Query {
	return Query{Version: Version, Stream: stream.String(), MinRun: sel.MinRun, MaxRun: sel.MaxRun,
		MinEvent: sel.MinEvent, MaxEvent: sel.MaxEvent, Limit: limit}
}

// Encode is q as JSON.
func (q Query) Encode() []byte {
	b, _ := json.Marshal(q)
	return b
}

// ParseQuery decodes and checks a query. Errors wrap ErrBadQuery.
func ParseQuery(b []byte) (Query, storage.Stream, storage.Selection, error) {
	var q Query
	if err := json.Unmarshal(b, &q); err != nil {
		return q, 0, storage.Selection{}, fmt.Errorf("%w: %v", ErrBadQuery, err)
	}
	if q.Version != Version {
		return q, 0, storage.Selection{}, fmt.Errorf("%w: version %d, this node speaks %d", ErrBadQuery, q.Version, Version)
	}
	st, err := storage.ParseStream(q.Stream)
	if err != nil {
		return q, 0, storage.Selection{}, fmt.Errorf("%w: %v", ErrBadQuery, err)
	}
	if q.Limit < 0 {
		return q, 0, storage.Selection{}, fmt.Errorf("%w: limit %d", ErrBadQuery, q.Limit)
	}
	return q, st, storage.Selection{MinRun: q.MinRun, MaxRun: q.MaxRun, MinEvent: q.MinEvent, MaxEvent: q.MaxEvent}, nil
}
