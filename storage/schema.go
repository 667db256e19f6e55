package storage

import (
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/sluice-daq/sluice/schemas"
)

// storeSchema is the meta record under metaSchemaKey: the value encoding
// version and the event schema (mode and source groups) every event value
// of the store follows, so that a reader rebuilds the Arrow schema without
// the node's configuration. It is stored as JSON (see doc.go).
type storeSchema struct {
	ValueVersion int           `json:"value_version"`
	Mode         schemas.Mode  `json:"mode"`
	Groups       []schemaGroup `json:"groups"`
}

type schemaGroup struct {
	Name    string `json:"name"`
	Sources string `json:"sources"` // schemas.FormatSourceList
}

func newStoreSchema(mode schemas.Mode, groups []schemas.SourceGroup) *storeSchema {
	ss := &storeSchema{ValueVersion: FormatVersion, Mode: mode}
	for _, g := range groups {
		ss.Groups = append(ss.Groups, schemaGroup{Name: g.Name, Sources: schemas.FormatSourceList(g.Sources)})
	}
	return ss
}

// FormatVersion is the store format this build writes, recorded as the
// schema record's value_version (doc.go): 1, event values in badger; 2,
// event values in segment files and pointers to them in badger (a store
// of version 1 opened for writing becomes version 2: its old values stay
// where they are and are still read).
const FormatVersion = 2

// parseStoreSchema decodes the meta record and refuses formats other than
// 1 and FormatVersion, naming the version found.
func parseStoreSchema(dir string, b []byte) (*storeSchema, error) {
	var ss storeSchema
	if err := json.Unmarshal(b, &ss); err != nil {
		return nil, fmt.Errorf("store %s: schema record: %w", dir, err)
	}
	if ss.ValueVersion != 1 && ss.ValueVersion != FormatVersion {
		return nil, fmt.Errorf("store %s: %w: written with store format (value_version) %d, this build reads versions 1 and %d",
			dir, ErrStoreVersion, ss.ValueVersion, FormatVersion)
	}
	return &ss, nil
}

func (ss *storeSchema) groups() ([]schemas.SourceGroup, error) {
	out := make([]schemas.SourceGroup, len(ss.Groups))
	for i, g := range ss.Groups {
		ids, err := schemas.ParseSourceList(g.Sources)
		if err != nil {
			return nil, fmt.Errorf("store schema: group %q: %w", g.Name, err)
		}
		out[i] = schemas.SourceGroup{Name: g.Name, Sources: ids}
	}
	return out, nil
}

// arrowSchema is the builder's event schema for the stored groups.
func (ss *storeSchema) arrowSchema() (*arrow.Schema, []schemas.SourceGroup, error) {
	groups, err := ss.groups()
	if err != nil {
		return nil, nil, err
	}
	s, err := schemas.EventSchema(ss.Mode, groups)
	return s, groups, err
}

// matches reports whether a batch's mode and groups are the store's.
func (ss *storeSchema) matches(eb *schemas.EventBatch) error {
	if eb.Mode != ss.Mode || len(eb.Groups) != len(ss.Groups) {
		return fmt.Errorf("%w: batch has mode %q and %d source groups, store has %q and %d",
			ErrSchemaMismatch, eb.Mode, len(eb.Groups), ss.Mode, len(ss.Groups))
	}
	for i, g := range eb.Groups {
		want := ss.Groups[i]
		if g.Name != want.Name || schemas.FormatSourceList(g.Sources) != want.Sources {
			return fmt.Errorf("%w: batch group %d is %q (sources %s), store has %q (sources %s)",
				ErrSchemaMismatch, i, g.Name, schemas.FormatSourceList(g.Sources), want.Name, want.Sources)
		}
	}
	return nil
}

func encodeStoreSchema(ss *storeSchema) ([]byte, error) {
	b, err := json.Marshal(ss)
	if err != nil {
		return nil, fmt.Errorf("store schema: %w", err)
	}
	return b, nil
}
