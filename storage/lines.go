package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	badger "github.com/dgraph-io/badger/v4"
)

// metaLinesKey holds the trigger line names of the stages whose decisions
// the store keeps (JSON: stage name -> names, bit i named by names[i]), so
// that `sluice store ls` names the lines of a stored verdict's bitmask
// without the node's plugins.
var metaLinesKey = []byte{metaPrefix, 'l', 'i', 'n', 'e', 's'}

// SetLineNames records the line names of the stages in names (stage name
// -> line names, as the plugins declare them), keeping those of stages
// not in names. Errors: the store's write errors; a read-only store
// refuses.
func (s *Store) SetLineNames(names map[string][]string) error {
	if s.opts.ReadOnly {
		return errors.New("store: read-only: line names not recorded")
	}
	return s.db.Update(func(txn *badger.Txn) error {
		all, err := readLineNames(txn)
		if err != nil {
			return err
		}
		maps.Copy(all, names)
		b, err := json.Marshal(all)
		if err != nil {
			return err
		}
		return txn.Set(metaLinesKey, b)
	})
}

// LineNames returns the recorded line names by stage; an empty map when
// none were recorded (a store of an older sluice).
func (s *Store) LineNames() (map[string][]string, error) {
	var out map[string][]string
	err := s.db.View(func(txn *badger.Txn) (err error) {
		out, err = readLineNames(txn)
		return err
	})
	return out, err
}

func readLineNames(txn *badger.Txn) (map[string][]string, error) {
	out := map[string][]string{}
	item, err := txn.Get(metaLinesKey)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	err = item.Value(func(v []byte) error { return json.Unmarshal(v, &out) })
	if err != nil {
		return nil, fmt.Errorf("store: line names record: %w", err)
	}
	return out, nil
}
