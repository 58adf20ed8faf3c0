package fleet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestAWorkerReadsAnObjectWholeOrNotAtAll: openObject, as worker a reads
// with its own permissions, gives an object of many chunks byte for byte;
// an object past the bound, a deleted or missing one, one whose chunks are
// not its digest's or fewer than its size, is an error, never a short
// read taken for the whole.
func TestAWorkerReadsAnObjectWholeOrNotAtAll(t *testing.T) {
	s := fleetOf(t)
	ctx := context.Background()
	djs, _ := jetstream.New(s.Conn())
	base, err := djs.ObjectStore(ctx, s.Subjects().BaseBucket())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := connect(t, s, filepath.Join(s.dir, "workers", "a.creds"))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	read := func(name string, limit int64) ([]byte, error) {
		r, err := openObject(ctx, js, s.Subjects().BaseBucket(), name, limit, "")
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 40<<10) // five chunks of nats.go's 128 KiB
	put, err := base.PutBytes(ctx, "big", big)
	if err != nil {
		t.Fatal(err)
	}
	// Read as the object the daemon put, and only so: one put in its
	// place (a whole other object, metadata and all) is refused.
	if r, err := openObject(ctx, js, s.Subjects().BaseBucket(), "big", 1<<30, put.Digest); err != nil {
		t.Errorf("the daemon's own object, by its digest: %v", err)
	} else if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, big) {
		t.Errorf("read %d bytes (%v) of the daemon's object", len(got), err)
	}
	if _, err := base.PutBytes(ctx, "replaced", []byte("the daemon's")); err != nil {
		t.Fatal(err)
	}
	want, _ := base.GetInfo(ctx, "replaced")
	if _, err := base.PutBytes(ctx, "replaced", []byte("someone else's")); err != nil {
		t.Fatal(err)
	}
	if _, err := openObject(ctx, js, s.Subjects().BaseBucket(), "replaced", 1<<30, want.Digest); err == nil || !strings.Contains(err.Error(), "not the object the daemon put there") {
		t.Errorf("an object put in place of the daemon's: %v, want it refused", err)
	}
	if got, err := read("big", 1<<30); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read %d bytes (%v), want the %d put", len(got), err, len(big))
	}
	if _, err := read("big", int64(len(big))-1); err == nil || !strings.Contains(err.Error(), "over the bound") {
		t.Errorf("an object past the bound: %v", err)
	}
	// The bound holds for the daemon's own object too, asked by its digest.
	if _, err := openObject(ctx, js, s.Subjects().BaseBucket(), "big", int64(len(big))-1, put.Digest); err == nil || !strings.Contains(err.Error(), "over the bound") {
		t.Errorf("the daemon's object past the bound: %v", err)
	}
	if _, err := openObject(ctx, js, s.Subjects().BaseBucket(), "big", int64(len(big)), put.Digest); err != nil {
		t.Errorf("the daemon's object at the bound exactly: %v", err)
	}
	if _, err := read("absent", 1<<30); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("a missing object: %v", err)
	}
	base.PutBytes(ctx, "gone", []byte("x"))
	base.Delete(ctx, "gone")
	if _, err := read("gone", 1<<30); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("a deleted object: %v", err)
	}
	// The metadata the daemon wrote, over chunks that are not its: a
	// digest that does not match, and a size the chunks do not reach.
	info, err := base.PutBytes(ctx, "tampered", []byte("the base"))
	if err != nil {
		t.Fatal(err)
	}
	chunks := "$O." + s.Subjects().BaseBucket() + ".C." + info.NUID
	for _, tc := range []struct {
		name  string
		chunk []byte
		want  string
	}{
		{"digest", []byte("the evil"), "digest"},
		{"short", []byte("the"), "short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := djs.Stream(ctx, "OBJ_"+s.Subjects().BaseBucket())
			if err := st.Purge(ctx, jetstream.WithPurgeSubject(chunks)); err != nil {
				t.Fatal(err)
			}
			if _, err := djs.Publish(ctx, chunks, tc.chunk); err != nil {
				t.Fatal(err)
			}
			if _, err := read("tampered", 1<<30); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("read a tampered object: %v, want an error about its %s", err, tc.want)
			}
		})
	}
}
