// Package spool keeps what hooks saw while the daemon was not answering, so
// that the daemon can take it in when it is back: nothing a hook records is
// lost to a restart.
//
// A spool is a JSON-lines file in the project's state directory. Hooks
// append to it (O_APPEND: each record one write, so concurrent hooks do not
// interleave); the daemon drains it by renaming it aside first, so that
// hooks appending meanwhile start a fresh file and nothing is read twice.
package spool

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// FileName is the spool's name in the state directory.
const FileName = "hooks-spool.jsonl"

// Record is one hook event seen without the daemon.
type Record struct {
	Time    time.Time `json:"time"`
	Event   string    `json:"event"`
	Role    string    `json:"role,omitempty"`
	Feature string    `json:"feature,omitempty"`
	Run     string    `json:"run,omitempty"`
	// TokenHash binds the record to its run: the run's token, hashed (see
	// hook.TokenHash). Role, Feature and Run are what the run's environment
	// said; the daemon believes them only when the hash is the run's.
	TokenHash string          `json:"token_hash,omitempty"`
	Payload   json.RawMessage `json:"payload"`
	// Decision is what the hook decided alone, if it decided anything.
	Decision json.RawMessage `json:"decision,omitempty"`
}

// Append adds r to the spool in dir.
func Append(dir string, r Record) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read returns the records in the spool of dir without draining it; hooks
// use it to know what their run did while the daemon was away.
func Read(dir string) ([]Record, error) {
	return readFile(filepath.Join(dir, FileName))
}

// Drain hands every spooled record to fn, oldest first, then removes them.
// A line that does not decode is skipped and reported in the error, after
// the good ones were handled.
func Drain(dir string, fn func(Record) error) error {
	path := filepath.Join(dir, FileName)
	taking := path + ".draining"
	// A previous drain that died half-way left its file: finish it first.
	if _, err := os.Stat(taking); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(path, taking); errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
	}
	recs, readErr := readFile(taking)
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err // keep the file: the next drain retries
		}
	}
	if err := os.Remove(taking); err != nil {
		return err
	}
	return readErr
}

func readFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []Record
	var bad int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			bad++
			continue
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return recs, fmt.Errorf("spool %s: %w", path, err)
	}
	if bad > 0 {
		return recs, fmt.Errorf("spool %s: %d unreadable lines skipped", path, bad)
	}
	return recs, nil
}
