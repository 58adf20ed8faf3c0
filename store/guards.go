package store

import (
	"encoding/json"
	"fmt"

	"github.com/ctxgraphd/ctxgraphd/guards"
	bolt "go.etcd.io/bbolt"
)

// bucketGuards holds the guards proposed from patterns and what people
// made of them (warn, enforce, retired), by id. It is created by the first
// write rather than by a migration: a database without it has no guards
// yet, and reads as such.
var bucketGuards = []byte("guards")

// Guards returns every stored guard, by id.
func (s *Store) Guards() ([]guards.Rule, error) {
	var out []guards.Rule
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketGuards)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var r guards.Rule
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("store: guard %s: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// PutGuards stores guards, replacing those with the same ids, in one
// transaction.
func (s *Store) PutGuards(rs ...guards.Rule) error {
	return s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketGuards)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.ID == "" {
				return fmt.Errorf("store: a guard without an id (%s)", r.Summary())
			}
			if err := putJSON(b, []byte(r.ID), r); err != nil {
				return err
			}
			if err := s.part("guard " + r.ID); err != nil {
				return err
			}
		}
		return nil
	})
}
