package store

import (
	"fmt"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// removeTrace deletes trace t, as stored, and takes it out of every index.
func removeTrace(tx *bolt.Tx, t Trace) error {
	seq, err := strconv.ParseUint(strings.TrimPrefix(t.ID, "tr-"), 10, 64)
	if err != nil || !strings.HasPrefix(t.ID, "tr-") {
		return fmt.Errorf("store: remove trace %q: not a trace id (tr-N)", t.ID)
	}
	if err := tx.Bucket(bucketTraces).Delete(seqKey(seq)); err != nil {
		return err
	}
	return unindexTrace(tx, seq, t)
}
