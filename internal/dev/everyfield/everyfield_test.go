package everyfield

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

type inner struct {
	At    time.Time
	Notes []string
}

type record struct {
	Name    string
	Count   int
	Seq     uint64
	Cost    float64
	On      bool
	Wait    time.Duration
	Inner   *inner
	ByID    map[string]inner
	Raw     []byte
	Dropped string `json:"-"`
}

// Every field is filled, none zero, no two alike; a field lost on the
// way (json:"-") is named, by its path, and nothing else is.
func TestFillThenDiffNamesWhatWasLost(t *testing.T) {
	var r record
	Fill(&r)
	if r.Name == "" || r.Count == 0 || r.Seq == 0 || r.Cost == 0 || !r.On || r.Wait == 0 || r.Inner == nil || r.Inner.At.IsZero() ||
		len(r.Inner.Notes) == 0 || r.Inner.Notes[0] == "" || len(r.ByID) != 1 || len(r.Raw) == 0 || r.Dropped == "" {
		t.Fatalf("a field was left zero: %+v", r)
	}
	if r.Inner.Notes[0] == r.Inner.Notes[1] || r.Count == int(r.Seq) {
		t.Errorf("two fields alike: %+v", r)
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back record
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	d := Diff(r, back)
	if len(d) != 1 || !strings.HasPrefix(d[0], "record.Dropped: want record.Dropped-") {
		t.Errorf("Diff = %q, want only record.Dropped", d)
	}
	if d := Diff(r, r); len(d) != 0 {
		t.Errorf("a record differs from itself: %q", d)
	}
}

// Diff walks into pointers, slices and maps, and compares times as
// instants.
func TestDiffNamesTheField(t *testing.T) {
	var a record
	Fill(&a)
	b := a
	in := *a.Inner
	in.Notes = slices.Clone(in.Notes)
	in.Notes[1] = "other"
	in.At = in.At.In(time.FixedZone("X", 3600)) // the same instant
	b.Inner = &in
	b.ByID = map[string]inner{}
	for k, v := range a.ByID {
		v.At = v.At.Add(time.Nanosecond)
		b.ByID[k] = v
	}
	got := strings.Join(Diff(a, b), "\n")
	if !strings.Contains(got, "record.Inner.Notes[1]: want") || !strings.Contains(got, "record.ByID[") || !strings.Contains(got, "].At: want") || strings.Contains(got, "Inner.At") {
		t.Errorf("Diff =\n%s", got)
	}
}

// A type Fill cannot fill is said, not filled halfway.
func TestFillRefusesWhatItCannotFill(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "unexported") {
			t.Errorf("recovered %v, want a panic naming the unexported field", r)
		}
	}()
	var v struct{ hidden int }
	Fill(&v)
}
