package spool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAppendReadDrain(t *testing.T) {
	dir := t.TempDir()
	for _, ev := range []string{"pre-tool-use", "post-tool-use"} {
		if err := Append(dir, Record{Event: ev, Run: "run-000001", Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := Read(dir)
	if err != nil || len(recs) != 2 || recs[1].Event != "post-tool-use" {
		t.Fatalf("%v %+v", err, recs)
	}
	var got []string
	if err := Drain(dir, func(r Record) error { got = append(got, r.Event); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "pre-tool-use,post-tool-use" {
		t.Fatalf("drained %v", got)
	}
	if recs, _ := Read(dir); len(recs) != 0 {
		t.Fatalf("records left after drain: %+v", recs)
	}
	if err := Drain(dir, func(Record) error { t.Fatal("drained an empty spool"); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestDrainSkipsBadLinesButKeepsGoodOnes(t *testing.T) {
	dir := t.TempDir()
	Append(dir, Record{Event: "stop"})
	f, _ := os.OpenFile(filepath.Join(dir, FileName), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{torn\n")
	f.Close()
	Append(dir, Record{Event: "post-tool-use"})
	n := 0
	err := Drain(dir, func(Record) error { n++; return nil })
	if n != 2 || err == nil || !strings.Contains(err.Error(), "1 unreadable") {
		t.Fatalf("n=%d err=%v", n, err)
	}
}
